//! Sampling on the simulated kernel: the kernel's refusals for sampling attributes and ring
//! sizes, the records written into mapped rings (fields, the profile's retire latencies,
//! PERF_RECORD_LOST when the reader lags), and the retire-latency [`Sampler`] over it on
//! Meteor Lake (latencies) and Sapphire Rapids (no PEBS timing: latency 0).

use std::time::{Duration, Instant};

use tmetric_runtime::ring::{
    HEAP_PAGE, MISC_EXACT_IP, Reader, Record, SAMPLE_TYPE, SAMPLE_WEIGHT, SAMPLE_WEIGHT_STRUCT,
    SampleFormat,
};
use tmetric_runtime::sys::TYPE_SOFTWARE;
use tmetric_runtime::{
    Attr, SampleSpec, Sampler, SamplerError, SamplerOptions, Syscalls, Target, TpebsMode,
};
use tmetric_sim::{Machine, RETIRE_LATENCIES, SimEventKind, SimKernel};

const MS: u64 = 1_000_000;
/// MEM_INST_RETIRED.STLB_HIT_STORES on Golden Cove class cores (event 0xd0, umask 0x0a).
const STLB_HIT_STORES: u64 = 0x0ad0;
const EINVAL: i32 = libc::EINVAL;
const EOPNOTSUPP: i32 = libc::EOPNOTSUPP;

fn kernel(name: &str) -> SimKernel {
    SimKernel::manual(Machine::named(name).expect("a machine"))
}

/// A precise sampling event at `freq` samples per second with tmetric's sample layout.
fn sampled(type_: u32, config: u64, freq: u64) -> Attr {
    Attr {
        type_,
        config,
        sample_period: freq,
        freq: true,
        sample_type: SAMPLE_TYPE,
        precise_ip: 1,
        ..Attr::default()
    }
}

fn err(result: Result<i32, tmetric_runtime::Errno>) -> i32 {
    result.expect_err("refused").0
}

#[test]
fn sampling_attributes_are_refused_as_the_kernel_does() {
    let mut k = kernel("meteorlake");
    let core = 4; // cpu_core
    let ok = sampled(core, STLB_HIT_STORES, 4000);
    let fd = k.perf_event_open(&ok, -1, 0, -1).expect("a precise sampling event opens");
    assert_eq!(k.kind_of(fd), Some(SimEventKind::Sampling));
    // precise_ip 3 is caps/max_precise; a counting event with precise_ip is EINVAL.
    assert!(k.perf_event_open(&Attr { precise_ip: 3, ..ok.clone() }, -1, 0, -1).is_ok());
    let counting = Attr { sample_period: 0, freq: false, sample_type: 0, ..ok.clone() };
    assert_eq!(err(k.perf_event_open(&counting, -1, 0, -1)), EINVAL);
    // perf_copy_attr: WEIGHT with WEIGHT_STRUCT, and bits beyond PERF_SAMPLE_MAX.
    let both = Attr { sample_type: SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT, ..ok.clone() };
    assert_eq!(err(k.perf_event_open(&both, -1, 0, -1)), EINVAL);
    let unknown = Attr { sample_type: 1 << 25, ..ok.clone() };
    assert_eq!(err(k.perf_event_open(&unknown, -1, 0, -1)), EINVAL);
    // sample_freq above perf_event_max_sample_rate (100000), a period with bit 63.
    let fast = Attr { sample_period: 100_001, ..ok.clone() };
    assert_eq!(err(k.perf_event_open(&fast, -1, 0, -1)), EINVAL);
    let huge = Attr { sample_period: 1 << 63, freq: false, ..ok.clone() };
    assert_eq!(err(k.perf_event_open(&huge, -1, 0, -1)), EINVAL);
    // Topdown: metric events never sample; slots may, but not as the leader of metrics.
    let slots = Attr { config: 0x0400, precise_ip: 0, ..ok.clone() };
    let metric = Attr { config: 0x8000, ..Attr { type_: core, ..Attr::default() } };
    let sampled_metric = Attr { config: 0x8000, precise_ip: 0, ..ok.clone() };
    let counting_slots = Attr { type_: core, config: 0x0400, ..Attr::default() };
    let leader = k.perf_event_open(&counting_slots, -1, 1, -1).expect("slots");
    assert_eq!(err(k.perf_event_open(&sampled_metric, -1, 1, leader)), EINVAL);
    assert!(k.perf_event_open(&metric, -1, 1, leader).is_ok());
    let sampling_slots = k.perf_event_open(&slots, -1, 2, -1).expect("slots alone may sample");
    assert_eq!(err(k.perf_event_open(&metric, -1, 2, sampling_slots)), EINVAL);
    // PMUs without sampling: msr, power, cstate and Intel uncore EINVAL.
    let machine = k.machine();
    for (pmu, config) in
        [("msr", 0), ("power", 2), ("cstate_core", 2), ("uncore_imc_free_running_0", 0x10ff)]
    {
        let type_ = machine.pmu(pmu).expect(pmu).type_;
        let attr = Attr { type_, config, sample_period: 1000, ..Attr::default() };
        assert_eq!(err(k.perf_event_open(&attr, -1, 0, -1)), EINVAL, "{pmu}");
        let counting = Attr { sample_period: 0, ..attr };
        assert!(k.perf_event_open(&counting, -1, 0, -1).is_ok(), "{pmu} counts");
    }
    // Variable-length fields are not modelled: refused rather than written wrongly.
    let callchain = Attr { sample_type: SAMPLE_TYPE | 1 << 5, ..ok.clone() };
    assert_eq!(err(k.perf_event_open(&callchain, -1, 0, -1)), EOPNOTSUPP);
    // Software events sample without precise_ip limits of a PMU.
    let cpu_clock = Attr { type_: TYPE_SOFTWARE, config: 0, precise_ip: 0, ..ok.clone() };
    assert!(k.perf_event_open(&cpu_clock, -1, 0, -1).is_ok());

    // Without PEBS (max_precise 0, as in most VMs): EOPNOTSUPP.
    let mut no_pebs = Machine::named("meteorlake").unwrap();
    for pmu in &mut no_pebs.pmus {
        for (name, value) in &mut pmu.caps {
            if name == "max_precise" {
                *value = "0".into();
            }
        }
    }
    let mut k = SimKernel::manual(no_pebs);
    assert_eq!(err(k.perf_event_open(&ok, -1, 0, -1)), EOPNOTSUPP);
    assert!(k.perf_event_open(&Attr { precise_ip: 0, ..ok.clone() }, -1, 0, -1).is_ok());
    // AMD: precise_ip above max_precise 0; uncore boxes have no interrupt (EOPNOTSUPP).
    let mut k = kernel("amdzen4");
    let amd = sampled(4, 0x76, 1000);
    assert_eq!(err(k.perf_event_open(&amd, -1, 0, -1)), EOPNOTSUPP);
    assert!(k.perf_event_open(&Attr { precise_ip: 0, ..amd }, -1, 0, -1).is_ok());
    let l3 = k.machine().pmu("amd_l3").unwrap().type_;
    let attr = Attr { type_: l3, config: 0x0104, sample_period: 1000, ..Attr::default() };
    assert_eq!(err(k.perf_event_open(&attr, -1, 0, -1)), EOPNOTSUPP);
}

#[test]
fn precise_events_take_the_pebs_counters_only() {
    // intel_glc_pebs_event_constraints: precise INST_RETIRED.ANY_P (0xc0) only on GP
    // counters 1-7, so a group of eight does not fit (EINVAL), where fixed counter 0 and the
    // eight GP counters take nine plain ones.
    let mut k = kernel("sapphirerapids");
    let precise = sampled(4, 0x00c0, 1000);
    let mut fds = vec![k.perf_event_open(&precise, -1, 0, -1).unwrap()];
    for _ in 0..6 {
        fds.push(k.perf_event_open(&precise, -1, 0, fds[0]).unwrap());
    }
    assert_eq!(err(k.perf_event_open(&precise, -1, 0, fds[0])), EINVAL);
    let plain = Attr { precise_ip: 0, ..precise };
    let mut fds = vec![k.perf_event_open(&plain, -1, 1, -1).unwrap()];
    for _ in 0..8 {
        fds.push(k.perf_event_open(&plain, -1, 1, fds[0]).unwrap());
    }
    assert_eq!(err(k.perf_event_open(&plain, -1, 1, fds[0])), EINVAL);
}

#[test]
fn rings_are_a_control_page_and_a_power_of_two_of_data_pages() {
    let mut k = kernel("meteorlake");
    let fd = k.perf_event_open(&sampled(4, STLB_HIT_STORES, 4000), -1, 0, -1).unwrap();
    let page = HEAP_PAGE;
    for bad in [0, 4 * page, 6 * page] {
        assert_eq!(k.mmap(fd, bad).unwrap_err().0, EINVAL, "{bad} bytes");
    }
    // mmap(2) rounds the length up to whole pages: 2 pages and a byte is 3 pages (2 data).
    let ring = k.mmap(fd, 2 * page + 1).expect("3 pages");
    assert_eq!(ring.data_area().unwrap(), (page, 2 * page));
    // A second mapping shares the ring and must have its size.
    assert_eq!(k.mmap(fd, 5 * page).unwrap_err().0, EINVAL);
    let again = k.mmap(fd, 3 * page).expect("the same ring");
    assert_eq!(again.data_area(), ring.data_area());
    assert_eq!(k.mmap(999, 2 * page).unwrap_err().0, libc::EBADF);
    // A control page alone is accepted (user page of a counting event).
    let counting =
        k.perf_event_open(&Attr { type_: 4, config: 0x3c, ..Attr::default() }, -1, 0, -1);
    assert!(k.mmap(counting.unwrap(), page).is_ok());
    // An inherited task event opened on any CPU cannot be mapped.
    let inherit = Attr { inherit: true, ..sampled(4, STLB_HIT_STORES, 4000) };
    let task = k.perf_event_open(&inherit, 4242, -1, -1).unwrap();
    assert_eq!(k.mmap(task, 2 * page).unwrap_err().0, EINVAL);
    let per_cpu = k.perf_event_open(&inherit, 4242, 1, -1).unwrap();
    assert!(k.mmap(per_cpu, 2 * page).is_ok());
}

#[test]
fn records_carry_the_requested_fields_and_the_profiles_latencies() {
    let mut k = kernel("meteorlake");
    let attr = sampled(4, STLB_HIT_STORES, 4000);
    let fd = k.perf_event_open(&attr, -1, 2, -1).unwrap();
    let id = k.event_id(fd).unwrap();
    let mut reader =
        Reader::new(k.mmap(fd, 9 * HEAP_PAGE).unwrap(), SampleFormat::new(SAMPLE_TYPE).unwrap());
    // 24.9 ms at 4000 Hz: 99 samples due, not a whole period of 100, so nothing yet.
    k.advance(24_900_000);
    let mut records = Vec::new();
    reader.drain(|r| records.push(r));
    assert!(records.is_empty(), "{records:?}");
    k.advance(100_000);
    let walk = reader.drain(|r| records.push(r));
    assert_eq!((walk.records, walk.error), (100, None));
    let expected: Vec<u16> = RETIRE_LATENCIES
        .iter()
        .find(|e| e.0 == STLB_HIT_STORES)
        .unwrap()
        .2
        .iter()
        .flat_map(|&(cycles, n)| std::iter::repeat_n(cycles, n as usize))
        .collect();
    assert_eq!(&expected[..4], [40, 40, 40, 3]);
    let mut latencies = Vec::new();
    for record in &records {
        let Record::Sample(s) = record else { panic!("{record:?}") };
        assert_eq!((s.id, s.cpu), (Some(id), Some(2)));
        assert_eq!(s.misc & MISC_EXACT_IP, MISC_EXACT_IP);
        assert_eq!(s.time, Some(25 * MS));
        latencies.push(s.weight.unwrap().var3_w());
    }
    assert_eq!(latencies, expected);
    // A fixed period instead of a frequency: one sample per `period` events; without
    // precise_ip no PEBS, so no retire latency. PERIOD is written when asked for.
    let rate = k
        .true_count(
            &Attr { type_: 4, config: STLB_HIT_STORES, ..Attr::default() },
            3,
            1_000_000_000,
        )
        .unwrap();
    let plain = Attr {
        sample_period: rate / 1000,
        freq: false,
        precise_ip: 0,
        sample_type: SAMPLE_TYPE | tmetric_runtime::ring::SAMPLE_PERIOD,
        ..attr
    };
    let fd = k.perf_event_open(&plain, -1, 3, -1).unwrap();
    let format = SampleFormat::new(plain.sample_type).unwrap();
    let mut reader = Reader::new(k.mmap(fd, 2 * HEAP_PAGE).unwrap(), format);
    k.advance(10 * MS);
    let mut samples = Vec::new();
    reader.drain(|r| {
        if let Record::Sample(s) = r {
            samples.push(s)
        }
    });
    assert_eq!(samples.len(), 10);
    assert!(samples.iter().all(|s| s.period == Some(rate / 1000) && s.misc & MISC_EXACT_IP == 0));
    assert!(samples.iter().all(|s| s.weight.unwrap().var3_w() == 0));
}

#[test]
fn a_ring_the_reader_does_not_drain_loses_samples_and_says_how_many() {
    let mut k = kernel("meteorlake");
    let attr = Attr { read_format: 0x10, ..sampled(4, STLB_HIT_STORES, 4000) };
    let fd = k.perf_event_open(&attr, -1, 0, -1).unwrap();
    // One data page: 73 records of 56 bytes fit (4088 bytes).
    let mut reader =
        Reader::new(k.mmap(fd, 2 * HEAP_PAGE).unwrap(), SampleFormat::new(SAMPLE_TYPE).unwrap());
    k.advance(100 * MS); // 400 samples due without a drain in between
    let mut buf = [0u8; 16];
    assert_eq!(k.read(fd, &mut buf), Ok(16));
    let lost = u64::from_ne_bytes(buf[8..].try_into().unwrap());
    assert_eq!(lost, 400 - 73, "PERF_FORMAT_LOST");
    let mut first = Vec::new();
    reader.drain(|r| first.push(r));
    assert_eq!(first.len(), 73);
    assert!(first.iter().all(|r| matches!(r, Record::Sample(_))));
    // Room again: the next record is PERF_RECORD_LOST with the count, then the samples.
    k.advance(25 * MS);
    let mut next = Vec::new();
    reader.drain(|r| next.push(r));
    assert_eq!(next[0], Record::Lost { id: k.event_id(fd).unwrap(), lost: 327 });
    // The LOST record (24 bytes) and 72 samples fill the page; 28 of the 100 are lost.
    assert_eq!(next.len(), 1 + 72);
    assert_eq!(k.read(fd, &mut buf), Ok(16));
    assert_eq!(u64::from_ne_bytes(buf[8..].try_into().unwrap()), 327 + 28);
}

/// The `:R` event of tma_dtlb_store as tmetric's CLI asks for it.
fn stlb_spec(cpus: Option<Vec<u32>>) -> SampleSpec {
    SampleSpec {
        name: "cpu_core/MEM_INST_RETIRED.STLB_HIT_STORES/R".to_string(),
        attr: Attr { type_: 4, config: STLB_HIT_STORES, precise_ip: 1, ..Attr::default() },
        cpus,
    }
}

fn options() -> SamplerOptions {
    SamplerOptions { poll_interval: Duration::from_millis(5), ..SamplerOptions::default() }
}

#[test]
fn the_sampler_on_meteor_lake_gives_the_profiles_statistics() {
    let k = kernel("meteorlake");
    let target = Target::Cpus((0..8).collect());
    let mut sampler =
        Sampler::start(k.clone(), &[stlb_spec(Some(vec![0, 1, 2, 3]))], &target, &options())
            .expect("start");
    assert_eq!(sampler.descriptors(), 4, "cpu_core CPUs only");
    // 100 ms at 4000 Hz: 400 samples, 4 whole periods, on each of 4 CPUs.
    k.advance(100 * MS);
    let reports = sampler.read().expect("read");
    let t = reports[0].total;
    assert_eq!(t.count, 1600);
    // One period: 3 x 40, 60 x 3, 37 x 5 cycles.
    assert_eq!(t.mean, Some(485.0 / 100.0));
    assert_eq!((t.min, t.max, t.last), (Some(3.0), Some(40.0), Some(5.0)));
    // tail_count(1600) = 1552: every sample but the 48 of 40 cycles.
    assert_eq!(t.p97, Some(365.0 / 97.0));
    assert_eq!((t.lost, reports[0].kernel_lost), (0, Some(0)));
    assert_eq!(t.value(TpebsMode::P97), Some(365.0 / 97.0));
    // The next interval: 50 ms more.
    k.advance(50 * MS);
    let reports = sampler.stop().expect("stop");
    assert_eq!((reports[0].interval.count, reports[0].total.count), (800, 2400));
    assert_eq!(reports[0].interval.mean, Some(4.85));
    assert_eq!(k.open_count(), 0);
}

#[test]
fn sapphire_rapids_samples_without_retire_latency() {
    // SPR has no PEBS timing info (no PMU_FL_RETIRE_LATENCY): samples are real, var3_w is 0.
    // No perf 6.12 SPR metric reads `:R`, so this is checked here and not through a metric.
    let k = kernel("sapphirerapids");
    let target = Target::Cpus(vec![0, 5]);
    let sampler = Sampler::start(k.clone(), &[stlb_spec(None)], &target, &options()).unwrap();
    k.advance(50 * MS);
    let reports = sampler.stop().unwrap();
    let t = reports[0].total;
    assert_eq!(t.count, 400);
    assert_eq!((t.mean, t.max, t.p97), (Some(0.0), Some(0.0), Some(0.0)));
}

#[test]
fn a_sampler_the_simulator_refuses_fails_at_once_with_nothing_open() {
    let mut machine = Machine::named("meteorlake").unwrap();
    for pmu in &mut machine.pmus {
        pmu.caps.retain(|(name, _)| name != "max_precise");
    }
    let k = SimKernel::manual(machine);
    let started = Instant::now();
    let err = Sampler::start(k.clone(), &[stlb_spec(None)], &Target::Cpus(vec![0, 1]), &options())
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(matches!(&err, SamplerError::Open { cpu: Some(0), .. }), "{err:?}");
    assert!(
        err.to_string().contains("EOPNOTSUPP") && err.to_string().contains("max_precise"),
        "{err}"
    );
    assert_eq!(k.open_count(), 0);
}

#[test]
fn a_simulated_sampler_that_stops_delivering_still_answers_in_bounded_time() {
    let k = kernel("meteorlake");
    let mut sampler =
        Sampler::start(k.clone(), &[stlb_spec(None)], &Target::Cpus(vec![0]), &options()).unwrap();
    k.advance(25 * MS);
    assert_eq!(sampler.read().unwrap()[0].total.count, 100);
    // The simulated clock stops: nothing more arrives, and reads still answer at once.
    for _ in 0..3 {
        let started = Instant::now();
        let reports = sampler.read().unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!((reports[0].interval.count, reports[0].total.count), (0, 100));
    }
    drop(sampler);
    // A reader that is stuck: read and stop give up after the answer timeout.
    let slow = SamplerOptions {
        answer_timeout: Duration::from_millis(100),
        reader_delay: Duration::from_secs(3),
        ..options()
    };
    let mut sampler =
        Sampler::start(k.clone(), &[stlb_spec(None)], &Target::Cpus(vec![1]), &slow).unwrap();
    let started = Instant::now();
    assert!(matches!(sampler.read(), Err(SamplerError::NoAnswer { what: "read", .. })));
    assert!(matches!(sampler.stop(), Err(SamplerError::NoAnswer { what: "stop", .. })));
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(k.open_count(), 0);
}

#[test]
fn software_events_sample_with_a_zero_weight() {
    let k = kernel("meteorlake");
    let spec = SampleSpec {
        name: "cpu-clock".into(),
        attr: Attr { type_: TYPE_SOFTWARE, config: 0, ..Attr::default() },
        cpus: None,
    };
    let sampler = Sampler::start(k.clone(), &[spec], &Target::Cpus(vec![6]), &options()).unwrap();
    k.advance(10 * MS);
    let t = sampler.stop().unwrap()[0].total;
    assert_eq!((t.count, t.max), (40, Some(0.0)));
}

#[test]
fn a_task_on_a_hybrid_is_sampled_on_the_cpus_of_the_events_pmu() {
    // Per-CPU inherited task events: cpu_core exists only on CPUs 0-3 (ENOENT on 4-7).
    let k = kernel("meteorlake");
    let options = SamplerOptions { task_cpus: (0..8).collect(), ..options() };
    let target = Target::Task { pid: 4242, on_exec: false };
    let mut sampler =
        Sampler::start(k.clone(), &[stlb_spec(Some(vec![0, 1, 2, 3]))], &target, &options)
            .expect("start");
    assert_eq!(sampler.descriptors(), 4);
    k.advance(25 * MS);
    let t = sampler.read().unwrap()[0].total;
    // The simulated task runs on every CPU it is opened on, the whole time.
    assert_eq!((t.count, t.mean), (400, Some(4.85)));
    sampler.stop().unwrap();
    // Without the PMU's CPU list the kernel refuses the foreign CPUs, and nothing stays open.
    let err = Sampler::start(k.clone(), &[stlb_spec(None)], &target, &options).unwrap_err();
    assert!(matches!(err, SamplerError::Open { cpu: Some(4), .. }), "{err:?}");
    assert_eq!(k.open_count(), 0);
}
