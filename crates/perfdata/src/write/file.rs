//! The file form: the header rewritten at the end, event ids and attributes, and the feature
//! sections perf 6.12 writes after the data.

use std::io::{self, Seek, SeekFrom, Write};

use super::layout::Section;
use super::{
    ATTR_SIZE_VER7, ATTR_SIZE_VER8, Caps, CpuTopology, Event, Features, Setup, Writer, check_ids,
};
use crate::{
    FEAT_CMDLINE, FEAT_CPUID, FEAT_EVENT_DESC, FEAT_HOSTNAME, FEAT_NRCPUS, FEAT_OSRELEASE,
    FEAT_VERSION,
};

const FEAT_ARCH: usize = 6;
const FEAT_CPUDESC: usize = 8;
const FEAT_TOTAL_MEM: usize = 10;
const FEAT_CPU_TOPOLOGY: usize = 13;
const FEAT_NUMA_TOPOLOGY: usize = 14;
const FEAT_PMU_MAPPINGS: usize = 16;
const FEAT_GROUP_DESC: usize = 17;
const FEAT_STAT: usize = 19;
const FEAT_CACHE: usize = 20;
const FEAT_SAMPLE_TIME: usize = 21;
const FEAT_CLOCKID: usize = 23;
const FEAT_COMPRESSED: usize = 27;
const FEAT_CPU_PMU_CAPS: usize = 28;
const FEAT_CLOCK_DATA: usize = 29;
const FEAT_HYBRID_TOPOLOGY: usize = 30;
const FEAT_PMU_CAPS: usize = 31;

impl<W: Write + Seek> Writer<W> {
    /// Starts a file: the header (rewritten by [`Writer::finish_file`]), the ids and
    /// attributes, then the first data records.
    pub fn file(out: W, events: Vec<Event>, setup: &Setup) -> io::Result<Writer<W>> {
        check_ids(&events)?;
        // perf 6.1 refuses a file attribute larger than its own (128 bytes).
        let attr_size = if events.iter().any(|e| e.attr.config3 != 0) {
            ATTR_SIZE_VER8
        } else {
            ATTR_SIZE_VER7
        };
        let mut w = Writer { out, pipe: false, at: 0, data_offset: 0, events, attr_size };
        let (body, attrs) = w.ids_and_attrs();
        w.data_offset = 104 + body.len() as u64;
        let header = w.file_header(attrs, 0, &[]);
        w.emit(&header)?;
        w.emit(&body)?;
        w.setup(setup)?;
        Ok(w)
    }

    /// Ends a file: the feature sections after the data, then the header again with the data
    /// size and the feature bits. Returns the writer, positioned at the end.
    pub fn finish_file(mut self, features: &Features) -> io::Result<W> {
        debug_assert!(!self.pipe, "finish_file on a pipe");
        let data_size = self.at - self.data_offset;
        let sections = self.sections(features);
        let table_at = self.at;
        let mut offset = table_at + 16 * sections.len() as u64;
        let mut table = Vec::new();
        for (_, bytes) in &sections {
            table.extend_from_slice(&offset.to_le_bytes());
            table.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            offset += bytes.len() as u64;
        }
        self.emit(&table)?;
        for (_, bytes) in &sections {
            self.emit(bytes)?;
        }
        let (_, attrs) = self.ids_and_attrs();
        let bits: Vec<usize> = sections.iter().map(|(bit, _)| *bit).collect();
        let header = self.file_header(attrs, data_size, &bits);
        self.out.flush()?;
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&header)?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Every feature section, in bit order.
    fn sections(&self, f: &Features) -> Vec<(usize, Vec<u8>)> {
        let mut out: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut add = |bit: usize, s: &Section| out.push((bit, s.0.clone()));
        let string = |s: &str| {
            let mut sec = Section::default();
            sec.string(s);
            sec
        };
        for (bit, value) in [
            (FEAT_HOSTNAME, &f.hostname),
            (FEAT_OSRELEASE, &f.os_release),
            (FEAT_VERSION, &f.version),
            (FEAT_ARCH, &f.arch),
        ] {
            if let Some(v) = value {
                add(bit, &string(v));
            }
        }
        if let Some((avail, online)) = f.nr_cpus {
            add(FEAT_NRCPUS, Section::default().u32(avail).u32(online));
        }
        if let Some(v) = &f.cpu_desc {
            add(FEAT_CPUDESC, &string(v));
        }
        if let Some(v) = &f.cpuid {
            add(FEAT_CPUID, &string(v));
        }
        if let Some(kb) = f.total_mem_kb {
            add(FEAT_TOTAL_MEM, Section::default().u64(kb));
        }
        if let Some(args) = &f.cmdline {
            add(FEAT_CMDLINE, Section::default().strings(args));
        }
        add(FEAT_EVENT_DESC, &self.event_desc());
        // NRCPUS first: perf reads the per-CPU ids of the topology for that many CPUs.
        if let (Some(t), Some(_)) = (&f.topology, f.nr_cpus) {
            add(FEAT_CPU_TOPOLOGY, &topology_section(t));
        }
        if let Some(nodes) = &f.numa {
            let mut s = Section::default();
            s.u32(nodes.len() as u32);
            for n in nodes {
                s.u32(n.node).u64(n.mem_total_kb).u64(n.mem_free_kb).string(&n.cpus);
            }
            add(FEAT_NUMA_TOPOLOGY, &s);
        }
        if let Some(pmus) = &f.pmu_mappings {
            let mut s = Section::default();
            s.u32(pmus.len() as u32);
            for (type_, name) in pmus {
                s.u32(*type_).string(name);
            }
            add(FEAT_PMU_MAPPINGS, &s);
        }
        let mut s = Section::default();
        s.u32(f.groups.len() as u32);
        for g in &f.groups {
            s.string(&g.name).u32(g.leader).u32(g.members);
        }
        add(FEAT_GROUP_DESC, &s);
        // `HEADER_STAT` has no data: its bit says the file holds counts.
        add(FEAT_STAT, &Section::default());
        if let Some(caches) = &f.caches {
            let mut s = Section::default();
            s.u32(1).u32(caches.len() as u32);
            for c in caches {
                s.u32(c.level).u32(c.line_size).u32(c.sets).u32(c.ways);
                s.string(&c.type_).string(&c.size).string(&c.cpus);
            }
            add(FEAT_CACHE, &s);
        }
        // No samples: first and last sample times 0; no clock: resolution 0.
        add(FEAT_SAMPLE_TIME, Section::default().u64(0).u64(0));
        add(FEAT_CLOCKID, Section::default().u64(0));
        // Not compressed: version, type, level, ratio, mmap length all 0.
        add(FEAT_COMPRESSED, Section::default().u32(0).u32(0).u32(0).u32(0).u64(0));
        if let Some(caps) = &f.cpu_pmu_caps {
            let mut s = Section::default();
            s.u32(caps.len() as u32);
            for (name, value) in caps {
                s.string(name).string(value);
            }
            add(FEAT_CPU_PMU_CAPS, &s);
        }
        // Version 1, clockid 0, no reference times.
        add(FEAT_CLOCK_DATA, Section::default().u32(1).u32(0).u64(0).u64(0));
        if let Some(pmus) = &f.hybrid {
            let mut s = Section::default();
            s.u32(pmus.len() as u32);
            for (name, cpus) in pmus {
                s.string(name).string(cpus);
            }
            add(FEAT_HYBRID_TOPOLOGY, &s);
        }
        if let Some(pmus) = &f.pmu_caps {
            add(FEAT_PMU_CAPS, &pmu_caps_section(pmus));
        }
        out
    }

    /// `HEADER_EVENT_DESC`: every event's attribute, ids and name.
    fn event_desc(&self) -> Section {
        let mut desc = Section::default();
        desc.u32(self.events.len() as u32).u32(self.attr_size);
        for e in &self.events {
            desc.0.extend_from_slice(&e.attr.bytes(self.attr_size));
            desc.u32(e.ids.len() as u32).string(&e.name);
            for &id in &e.ids {
                desc.u64(id);
            }
        }
        desc
    }
}

/// `HEADER_CPU_TOPOLOGY`: the sibling lists, each CPU's core and socket, and the dies when
/// there are any.
fn topology_section(t: &CpuTopology) -> Section {
    let mut s = Section::default();
    s.strings(&t.package_cpus).strings(&t.core_cpus);
    for &(core, socket, _) in &t.ids {
        s.u32(core as u32).u32(socket as u32);
    }
    if !t.die_cpus.is_empty() {
        s.strings(&t.die_cpus);
        for &(_, _, die) in &t.ids {
            s.u32(die as u32);
        }
    }
    s
}

/// `HEADER_PMU_CAPS`: each PMU's capabilities, then its name.
fn pmu_caps_section(pmus: &[(String, Caps)]) -> Section {
    let mut s = Section::default();
    s.u32(pmus.len() as u32);
    for (pmu, caps) in pmus {
        s.u32(caps.len() as u32);
        for (name, value) in caps {
            s.string(name).string(value);
        }
        s.string(pmu);
    }
    s
}
