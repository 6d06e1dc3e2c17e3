//! The machines' written sysfs and proc trees, read back by the runtime's `Sysfs` and
//! `host_cpuid` and by the catalogue: every catalogue event resolves and opens alone, and every
//! metric's PMUs exist.

use std::path::{Path, PathBuf};

use tmetric_runtime::sys::READ_FORMAT;
use tmetric_runtime::sysfs::{host_cpuid, parse_cpu_list};
use tmetric_runtime::{Attr, Syscalls, Sysfs};
use tmetric_sim::{Machine, SimKernel};

use super::machine;

/// A sysfs and proc tree in a private temporary directory, removed on drop.
struct TempTree(tempfile::TempDir);

impl TempTree {
    fn new(tag: &str) -> TempTree {
        let dir = tempfile::Builder::new().prefix(&format!("tmetric-sim-{tag}-")).tempdir();
        TempTree(dir.expect("a temporary directory"))
    }
    fn sys(&self) -> PathBuf {
        self.0.path().join("sys")
    }
    fn proc(&self) -> PathBuf {
        self.0.path().join("proc")
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_machine_writes_a_tree_that_sysfs_and_the_catalogue_read_back() {
    assert_eq!(Machine::names().len(), 9);
    for &name in Machine::names() {
        let m = Machine::named(name).unwrap();
        let tree = TempTree::new(name);
        m.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
        let sysfs = Sysfs::new(tree.sys());
        let names = sysfs.pmu_names();
        for pmu in &m.pmus {
            assert!(names.contains(&pmu.name), "{name}: {} missing", pmu.name);
            let read_back = sysfs.pmu(&pmu.name).unwrap();
            assert_eq!(read_back.type_, pmu.type_, "{name}/{}", pmu.name);
            // A core PMU's `cpus` (hybrid, Arm) limits where its events open, as `cpumask` does.
            let expected = pmu.cpumask.clone().or_else(|| pmu.cpus.clone());
            assert_eq!(read_back.cpumask, expected, "{name}/{}", pmu.name);
            if let Some(cpus) = &pmu.cpus {
                let text = read(&read_back.dir().join("cpus"));
                assert_eq!(parse_cpu_list(&text).as_ref(), Some(cpus), "{name}/{}", pmu.name);
            }
        }
        let cpuid = host_cpuid(&sysfs, &tree.proc()).expect("cpuid");
        assert_eq!(cpuid, m.cpuid(), "{name}");
        let model = tmetric_catalog::model_for_cpuid(&cpuid).expect("catalogue model");
        assert_eq!(model.name, m.catalogue_model, "{name}: {cpuid}");
        let topology = sysfs.topology().unwrap();
        assert_eq!(topology.online.len(), m.cpus.len(), "{name}");
        assert_eq!(topology.smt_on, m.smt, "{name}");
        let watchdog = read(&tree.proc().join("sys/kernel/nmi_watchdog"));
        assert_eq!(watchdog.trim(), if m.nmi_watchdog { "1" } else { "0" }, "{name}");
    }
}

#[test]
fn written_trees_carry_the_kernel_files() {
    let tree = TempTree::new("files");
    let spr = machine("sapphirerapids", false);
    spr.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    assert_eq!(sysfs.core_pmu().as_deref(), Some("cpu"));
    let cpu = sysfs.pmu("cpu").unwrap();
    assert_eq!(cpu.type_, 4);
    assert_eq!(cpu.alias("slots").unwrap().unwrap().terms, "event=0x00,umask=0x4");
    assert_eq!(cpu.alias("topdown-mem-bound").unwrap().unwrap().terms, "event=0x00,umask=0x87");
    assert!(cpu.alias_names().contains(&"ref-cycles".to_string()));
    assert!(cpu.format("any").is_none(), "no AnyThread on perfmon v5");
    assert_eq!(cpu.format("offcore_rsp").unwrap().word, 1);
    assert_eq!(read(&cpu.dir().join("caps/pmu_name")).trim(), "sapphire_rapids");
    let imc = sysfs.pmu("uncore_imc_0").unwrap();
    assert_eq!(imc.cpumask, Some(vec![0, 4]), "one reader CPU per package");
    let energy = sysfs.pmu("power").unwrap().alias("energy-pkg").unwrap().unwrap();
    assert_eq!(energy.unit.as_deref(), Some("Joules"));
    let topology = sysfs.topology().unwrap();
    assert_eq!((topology.cores, topology.packages, topology.num_cpus), (4, 2, 8));
    assert_eq!(read(&tree.proc().join("sys/kernel/nmi_watchdog")).trim(), "0");

    let tree = TempTree::new("files-adl");
    machine("alderlake", true).write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    assert_eq!(sysfs.core_pmu().as_deref(), Some("cpu_core"));
    assert!(!sysfs.has_pmu("cpu"));
    let atom = sysfs.pmu("cpu_atom").unwrap();
    assert_eq!(atom.type_, 10);
    assert_eq!(atom.alias("topdown-retiring").unwrap().unwrap().terms, "event=0xc2,umask=0x0");
    assert!(atom.alias("slots").unwrap().is_none(), "no PERF_METRICS on the atom PMU");

    let tree = TempTree::new("files-skx");
    machine("skylakex", true).write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let cpu = Sysfs::new(tree.sys()).pmu("cpu").unwrap();
    let slots = cpu.alias("topdown-total-slots").unwrap().unwrap();
    assert_eq!((slots.terms.as_str(), slots.scale), ("event=0x3c,umask=0x0,any=1", Some(2.0)));

    let tree = TempTree::new("files-n2");
    machine("neoverse-n2", true).write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    assert_eq!(sysfs.core_pmu().as_deref(), Some("armv8_pmuv3_0"));
    let arm = sysfs.pmu("armv8_pmuv3_0").unwrap();
    assert_eq!(read(&arm.dir().join("caps/slots")).trim(), "0x00000005");
    assert_eq!(host_cpuid(&sysfs, &tree.proc()).as_deref(), Some("0x00000000410fd493"));
}

/// The machine's PMU for a catalogue PMU name: itself, the core PMU for `default_core`, or
/// the first instance (`uncore_cha` -> `uncore_cha_0`, `cha_0` -> `uncore_cha_0`).
fn pmu_instance(sysfs: &Sysfs, json_pmu: &str) -> Option<String> {
    if sysfs.has_pmu(json_pmu) {
        return Some(json_pmu.to_string());
    }
    if json_pmu == "default_core" || json_pmu == "cpu" {
        return sysfs.core_pmu();
    }
    let prefixed = format!("uncore_{json_pmu}");
    sysfs.pmu_names().into_iter().find(|n| {
        [json_pmu, prefixed.as_str()]
            .iter()
            .any(|p| n == p || n.strip_prefix(p).is_some_and(|rest| rest.starts_with('_')))
    })
}

#[test]
fn catalogue_events_resolve_and_open_alone_and_metric_pmus_exist() {
    // perf 6.12's tables: the simulated machines' PMUs are those its metrics read (7.2's Sapphire Rapids metrics also read `uncore_pcu`, which the machine lacks).
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    use tmetric_catalog::IdKind;
    use tmetric_runtime::event;
    for &name in Machine::names() {
        let m = machine(name, false);
        let tree = TempTree::new(&format!("events-{name}"));
        m.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
        let sysfs = Sysfs::new(tree.sys());
        let model = tmetric_catalog::model_for_cpuid(&m.cpuid()).unwrap();
        let mut k = SimKernel::manual(m.clone());
        let mut opened = 0;
        let mut failures = Vec::new();
        for e in model.events.iter() {
            let Some(pmu) = pmu_instance(&sysfs, model.str(e.pmu)) else { continue };
            let terms = model.str(e.encoding);
            let result = event::resolve_on_pmu(&pmu, terms, "", "x", &sysfs)
                .map_err(|err| err.to_string())
                .and_then(|c| {
                    let (_, p) = m.pmu_by_type(c.attr.type_).expect("a PMU of the machine");
                    let cpu = p.cpus.as_ref().map_or(0, |c| c[0]);
                    let attr = Attr { read_format: READ_FORMAT, ..c.attr };
                    k.perf_event_open(&attr, -1, cpu as i32, -1).map_err(|e| e.to_string())
                });
            match result {
                Ok(fd) => {
                    opened += 1;
                    k.close(fd);
                }
                Err(err) => failures.push(format!("{} {pmu}/{terms}: {err}", model.str(e.name))),
            }
        }
        // The SPR IIO JSON puts channel bits into `umask`, wider than the kernel's 8-bit
        // IIO umask format: perf refuses those the same way.
        for id in model.ids {
            if let IdKind::Event(i) = id.kind {
                let event = model.str(model.events.at(i as usize).name);
                let prefix = format!("{event} ");
                assert!(
                    !failures.iter().any(|f| f.starts_with(&prefix)),
                    "{name}: metric input {event} does not open"
                );
            }
        }
        let before = failures.len();
        failures.retain(|f| {
            !(name == "sapphirerapids"
                && f.starts_with("UNC_IIO_")
                && f.ends_with("does not fit the 8 bits of the `umask` format"))
        });
        assert!(before - failures.len() <= 200, "{name}: {} IIO events", before - failures.len());
        assert!(failures.is_empty(), "{name}: {failures:#?}");
        assert!(opened > 150, "{name}: {opened}");
        for id in model.ids {
            let pmu = match id.kind {
                IdKind::Event(i) => model.str(model.events.at(i as usize).pmu),
                IdKind::Sysfs => model.str(id.pmu),
                _ => continue,
            };
            assert!(pmu_instance(&sysfs, pmu).is_some(), "{name}: a metric input on `{pmu}`");
        }
    }
}

/// Every file and directory under `root`, sorted by path: each directory as `path/`, each
/// file as `== path` followed by its text (a last line without its line end is marked).
fn tree_text(root: &Path) -> String {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Option<String>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).expect("under the root").display().to_string();
            if path.is_dir() {
                out.push((format!("{rel}/"), None));
                walk(root, &path, out);
            } else {
                out.push((rel, Some(read(&path))));
            }
        }
    }
    let mut entries = Vec::new();
    walk(root, root, &mut entries);
    let mut text = String::new();
    for (path, content) in entries {
        match content {
            None => text.push_str(&format!("{path}\n")),
            Some(content) => {
                text.push_str(&format!("== {path}\n{content}"));
                if !content.ends_with('\n') {
                    text.push_str("\n\\ no line end\n");
                }
            }
        }
    }
    text
}

/// The tree each machine and guest writes is its snapshot, byte for byte (the snapshots were
/// written from the machines as Rust code, before they became data files).
#[test]
fn every_machines_tree_is_its_snapshot() {
    for &name in Machine::names().iter().chain(Machine::guests()) {
        let tree = TempTree::new(name);
        Machine::named(name).unwrap().write_sysfs(&tree.sys(), &tree.proc()).unwrap();
        insta::assert_snapshot!(name, tree_text(tree.0.path()));
    }
}
