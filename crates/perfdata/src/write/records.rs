//! The data records any writer emits (`EVENT_UPDATE`, the maps, `STAT_CONFIG`, `STAT`,
//! `STAT_ROUND`, the caller's `HEADER_EVENT_TYPE` extras) and the pipe form, which carries the
//! attributes and event names as records too.

use std::io::{self, Write};

use super::layout::{align8, cpu_map_data, put_u64};
use super::{
    ATTR_SIZE_VER8, EVENT_UPDATE_BASE, EXTRA_MAGIC, Event, MAX_RECORD, Setup, Writer, check_ids,
};
use crate::{
    MAGIC, RECORD_CPU_MAP, RECORD_EVENT_UPDATE, RECORD_HEADER_ATTR, RECORD_HEADER_EVENT_TYPE,
    RECORD_STAT, RECORD_STAT_CONFIG, RECORD_STAT_ROUND, RECORD_THREAD_MAP, RoundKind,
};

impl<W: Write> Writer<W> {
    pub(super) fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.at += bytes.len() as u64;
        Ok(())
    }

    /// One record: `perf_event_header` (type, misc 0, size) and `body`, padded to 8 bytes.
    fn record(&mut self, kind: u32, body: &[u8]) -> io::Result<()> {
        let size = align8(8 + body.len());
        if size > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a record of {size} bytes does not fit perf's 16-bit record size"),
            ));
        }
        let mut r = Vec::with_capacity(size);
        r.extend_from_slice(&kind.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(body);
        r.resize(size, 0);
        self.emit(&r)
    }

    fn event_update(&mut self, kind: u64, id: u64, payload: &[u8]) -> io::Result<()> {
        let mut body = Vec::new();
        body.extend_from_slice(&kind.to_le_bytes());
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(payload);
        // perf sizes every EVENT_UPDATE from the whole struct, union included.
        body.resize(EVENT_UPDATE_BASE - 8 + payload.len(), 0);
        self.record(RECORD_EVENT_UPDATE, &body)
    }

    /// The records before the readings: units, scales, CPUs (and names in a pipe), the
    /// thread and CPU maps, the configuration.
    pub(super) fn setup(&mut self, setup: &Setup) -> io::Result<()> {
        for i in 0..self.events.len() {
            let e = self.events[i].clone();
            // perf describes an event by its first id; one that did not open has none.
            let Some(&id) = e.ids.first() else { continue };
            if let Some(unit) = e.unit.as_ref().filter(|u| !u.is_empty()) {
                let mut s = unit.as_bytes().to_vec();
                s.push(0);
                self.event_update(0, id, &s)?;
            }
            if let Some(scale) = e.scale.filter(|&s| s != 1.0) {
                self.event_update(1, id, &scale.to_le_bytes())?;
            }
            if let Some(cpus) = &e.cpus {
                let data = cpu_map_data(cpus);
                // The CPU map sits at the union: no base padding beyond the map itself.
                let mut body = Vec::new();
                body.extend_from_slice(&3u64.to_le_bytes());
                body.extend_from_slice(&id.to_le_bytes());
                body.extend_from_slice(&data);
                self.record(RECORD_EVENT_UPDATE, &body)?;
            }
            if self.pipe {
                let mut s = e.name.as_bytes().to_vec();
                s.push(0);
                self.event_update(2, id, &s)?;
            }
        }
        let mut body = (setup.threads.len() as u64).to_le_bytes().to_vec();
        for (pid, comm) in &setup.threads {
            body.extend_from_slice(&(*pid as i64 as u64).to_le_bytes());
            let mut c = [0u8; 16];
            let n = comm.len().min(15);
            c[..n].copy_from_slice(&comm.as_bytes()[..n]);
            body.extend_from_slice(&c);
        }
        self.record(RECORD_THREAD_MAP, &body)?;
        self.record(RECORD_CPU_MAP, &cpu_map_data(&setup.cpus))?;
        let mut terms = vec![
            (0u64, setup.aggr_mode.code()),
            (1, setup.interval_ms),
            (2, u64::from(setup.scale)),
        ];
        if setup.aggr_level != 0 {
            terms.push((3, setup.aggr_level));
        }
        let mut body = (terms.len() as u64).to_le_bytes().to_vec();
        for (tag, val) in terms {
            body.extend_from_slice(&tag.to_le_bytes());
            body.extend_from_slice(&val.to_le_bytes());
        }
        self.record(RECORD_STAT_CONFIG, &body)
    }

    /// Starts a pipe (`-o -`): the pipe header, the attributes with their ids, the event
    /// updates (names included), the maps and the configuration.
    pub fn pipe(out: W, events: Vec<Event>, setup: &Setup) -> io::Result<Writer<W>> {
        check_ids(&events)?;
        let mut w =
            Writer { out, pipe: true, at: 0, data_offset: 16, events, attr_size: ATTR_SIZE_VER8 };
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&16u64.to_le_bytes());
        w.emit(&head)?;
        for i in 0..w.events.len() {
            let mut body = w.events[i].attr.bytes(ATTR_SIZE_VER8);
            for id in w.events[i].ids.clone() {
                body.extend_from_slice(&id.to_le_bytes());
            }
            w.record(RECORD_HEADER_ATTR, &body)?;
        }
        w.setup(setup)?;
        Ok(w)
    }

    /// One reading: `id` of an event, on `cpu` (-1 for a task), `thread` (an index into the
    /// thread map). Values are counts since the start, as perf writes them.
    pub fn stat(
        &mut self,
        id: u64,
        cpu: i32,
        thread: u32,
        [value, enabled, running]: [u64; 3],
    ) -> io::Result<()> {
        let mut body = Vec::with_capacity(40);
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&(cpu as u32).to_le_bytes());
        body.extend_from_slice(&thread.to_le_bytes());
        for v in [value, enabled, running] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        self.record(RECORD_STAT, &body)
    }

    /// Closes the readings since the last round: an interval at `time_ns` since the start,
    /// or the end of the run (`time_ns`: the elapsed time).
    pub fn round(&mut self, kind: RoundKind, time_ns: u64) -> io::Result<()> {
        let mut body = Vec::with_capacity(16);
        let kind: u64 = match kind {
            RoundKind::Interval => 0,
            RoundKind::Final => 1,
        };
        body.extend_from_slice(&kind.to_le_bytes());
        body.extend_from_slice(&time_ns.to_le_bytes());
        self.record(RECORD_STAT_ROUND, &body)
    }

    /// The caller's own bytes, in as many `HEADER_EVENT_TYPE` records as they need. A reader
    /// gets back the concatenation of every call's bytes ([`crate::PerfData::extras`]); they
    /// must hold no NUL byte (the padding of the last record is NULs).
    pub fn extra(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.contains(&0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "extra data holds a NUL"));
        }
        let room = MAX_RECORD - 8 - EXTRA_MAGIC.len();
        for chunk in bytes.chunks(room) {
            let mut body = EXTRA_MAGIC.to_vec();
            body.extend_from_slice(chunk);
            self.record(RECORD_HEADER_EVENT_TYPE, &body)?;
        }
        Ok(())
    }

    /// Whether this writes a pipe.
    pub fn is_pipe(&self) -> bool {
        self.pipe
    }

    /// Ends a pipe: flushes and returns the writer.
    pub fn finish_pipe(mut self) -> io::Result<W> {
        debug_assert!(self.pipe, "finish_pipe on a file");
        self.out.flush()?;
        Ok(self.out)
    }

    /// The file header: magic, sizes, the attribute and data sections, the feature bits.
    pub(super) fn file_header(&self, attrs: (u64, u64), data_size: u64, bits: &[usize]) -> Vec<u8> {
        let mut h = vec![0u8; 104];
        h[..8].copy_from_slice(MAGIC);
        put_u64(&mut h, 8, 104);
        put_u64(&mut h, 16, u64::from(self.attr_size) + 16);
        put_u64(&mut h, 24, attrs.0);
        put_u64(&mut h, 32, attrs.1);
        put_u64(&mut h, 40, self.data_offset);
        put_u64(&mut h, 48, data_size);
        // event_types (56..72) stays zero, as perf leaves it.
        for &bit in bits {
            let at = 72 + 8 * (bit / 64);
            let word = u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
            put_u64(&mut h, at, word | 1 << (bit % 64));
        }
        h
    }

    /// The ids of every event, then the attributes (each followed by where its ids are).
    pub(super) fn ids_and_attrs(&self) -> (Vec<u8>, (u64, u64)) {
        let mut b = Vec::new();
        let mut places = Vec::new();
        for e in &self.events {
            places.push((104 + b.len() as u64, 8 * e.ids.len() as u64));
            for id in &e.ids {
                b.extend_from_slice(&id.to_le_bytes());
            }
        }
        let attrs_at = 104 + b.len() as u64;
        for (e, (at, len)) in self.events.iter().zip(places) {
            b.extend_from_slice(&e.attr.bytes(self.attr_size));
            b.extend_from_slice(&at.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
        }
        let attrs_len = 104 + b.len() as u64 - attrs_at;
        (b, (attrs_at, attrs_len))
    }
}
