//! Every input file through one bounded reader: devices and FIFOs are refused before a byte is
//! read (they read until memory ran out, or waited forever for a writer), and standard input
//! is capped.

use super::{bash_in, fails_with, scratch};

/// `/dev/zero` given as each kind of input file: each read until memory ran out (3.7 GB under
/// a 6 GB cap); now each is refused at once, naming the file. The address-space limit makes
/// the old behaviour fail fast instead of eating the machine.
#[test]
fn devices_are_refused_as_every_input_file() {
    let dir = scratch();
    let runs = [
        ("report -i /dev/zero", "cannot read /dev/zero"),
        ("eval --model x86/skylake --counts /dev/zero", "cannot read counts file `/dev/zero`"),
        (
            "stat --pmu-sim skylakex --pmu-sim-workload /dev/zero -e cycles true",
            "cannot read the workload `/dev/zero`",
        ),
        (
            "stat --pmu-sim meteorlake -M tma_load_stlb_hit --retire-latency /dev/zero -a sleep 0.1",
            "/dev/zero",
        ),
    ];
    for (args, needle) in runs {
        let out = bash_in(dir.path(), &format!("ulimit -v 3000000; timeout 60 $T {args}"));
        let text = fails_with(&out, 2, needle);
        assert!(text.contains("a character device, not a regular file"), "{args}: {text}");
    }
    // Standard input: a device is refused, a pipe is read up to the cap of its kind.
    let out = bash_in(dir.path(), "ulimit -v 3000000; timeout 60 $T report -i - < /dev/zero");
    fails_with(&out, 2, "standard input is a device");
    let out = bash_in(
        dir.path(),
        "ulimit -v 3000000; head -c 300M /dev/zero | timeout 60 $T eval --model x86/skylake --counts -",
    );
    fails_with(&out, 2, "larger than 256 MiB");
}

/// A FIFO with no writer as an input file waited forever (`--retire-latency`, `report -i`, a
/// file of a `--sysfs` tree blocked `plan`); now refused at once.
#[test]
fn fifos_are_refused_without_waiting_for_a_writer() {
    let dir = scratch();
    let out = bash_in(
        dir.path(),
        "mkfifo f && mkdir -p tree/bus/event_source/devices/cpu && mkfifo tree/bus/event_source/devices/cpu/type \
         && timeout 20 $T report -i f; echo \"report $?\"; \
         timeout 20 $T stat --pmu-sim meteorlake -M tma_load_stlb_hit --retire-latency f -a sleep 0.1; echo \"latency $?\"; \
         timeout 20 $T plan --sysfs tree -M TopdownL1; echo \"plan $?\"",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    for (command, line) in [("report", "report 2"), ("latency", "latency 2")] {
        assert!(text.contains(line), "{command}: {text}");
    }
    assert!(text.matches("a FIFO, not a regular file").count() >= 2, "{text}");
    assert!(!text.contains("plan 124"), "plan waited on the FIFO: {text}");
}

/// Damaged records were accepted: a reading that ran longer than it was enabled (printed as
/// 41618.49 %), interval times going backwards; and a perf.data left by a killed `record` was
/// called "not written by `perf stat record`". Each is now an error naming its line or why.
#[test]
fn damaged_and_unfinished_records_are_named() {
    let dir = scratch();
    let out = bash_in(
        dir.path(),
        "$T record --format jsonl -o r.jsonl -a -I 50 -e task-clock sleep 0.2 2>/dev/null || exit 9; \
         sed -E '2s/,[0-9]+\\]\\]/,42000000000]]/' r.jsonl > running.jsonl; \
         awk '/\"n\":2,/ { sub(/\"at_ns\":[0-9]+/, \"\\\"at_ns\\\":10\") } { print }' r.jsonl > backwards.jsonl; \
         $T report -i running.jsonl; echo \"running $?\"; $T report -i backwards.jsonl; echo \"backwards $?\"; \
         $T record -o k.data -a -I 10 -e task-clock,context-switches,page-faults,cpu-migrations sleep 4 >/dev/null 2>&1 & p=$!; \
         while [ $(stat -c %s k.data 2>/dev/null || echo 0) -lt 20000 ]; do sleep 0.1; done; kill -9 $p; wait $p; \
         $T report -i k.data; echo \"killed $?\"",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    for line in ["running 2", "backwards 2", "killed 2"] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    assert!(text.contains("running.jsonl:2: event 0 ran 42000000000 ns of"), "{text}");
    assert!(
        text.contains("backwards.jsonl:4: interval 2 ends at 10 ns, before interval 1"),
        "{text}"
    );
    assert!(text.contains("was killed before it finished"), "{text}");
    assert!(!text.contains("not written by"), "{text}");
}
