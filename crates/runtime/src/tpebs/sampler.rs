//! [`Sampler`]: opens one sampling event per CPU (or per task), maps the rings, starts the
//! reader thread, and reads or stops it with bounded waits; every descriptor is closed on
//! failure, stop or drop.

use std::fmt;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::reader::{Answer, Command, EventState, Ring, Thread};
use super::{EventReport, LatencyStats, SampleSpec, SamplerError, SamplerOptions, explain_open};
use crate::counter::Target;
use crate::ring::{Reader, SAMPLE_TYPE, SampleFormat, explain_mmap};
use crate::sys::{Errno, Syscalls};

/// `PERF_FORMAT_LOST`: `read()` of a sampling event gives `value, lost`.
const FORMAT_LOST: u64 = 0x10;

/// One opened sampling event.
#[derive(Debug, Clone, Copy)]
struct Opened {
    event: usize,
    cpu: Option<u32>,
    fd: i32,
}

/// Retire-latency sampling of some events, per CPU or per task, drained by a reader thread.
pub struct Sampler<S: Syscalls> {
    sys: S,
    names: Vec<String>,
    opened: Vec<Opened>,
    commands: Option<Sender<Command>>,
    answers: Receiver<Answer>,
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
    seq: u64,
    answer_timeout: Duration,
}

impl<S: Syscalls> fmt::Debug for Sampler<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sampler")
            .field("events", &self.names)
            .field("descriptors", &self.opened.len())
            .finish()
    }
}

/// Wakes the reader from its poll. `send` with MSG_NOSIGNAL, so a reader already gone (its
/// end closed) gives EPIPE instead of a SIGPIPE that would kill a program that restored the
/// default action; a full buffer (EAGAIN) already means a pending wake-up.
fn wake(socket: &UnixStream) {
    let byte = 1u8;
    // SAFETY: the pointer and length describe `byte`, which outlives the call.
    unsafe {
        libc::send(
            socket.as_raw_fd(),
            (&byte as *const u8).cast(),
            1,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        );
    }
}

fn close_all<S: Syscalls>(sys: &mut S, opened: &[Opened]) {
    for o in opened {
        sys.close(o.fd);
    }
}

/// Opens every spec as a sampling event on its CPUs of `target` (or on the task `pid`), with
/// a ring of `ring_bytes` of data; returns the descriptors and each spec's sample layout.
/// Fails with the first refusal, with everything closed again.
fn open_all<S: Syscalls>(
    sys: &mut S,
    specs: &[SampleSpec],
    target: &Target,
    options: &SamplerOptions,
    pid: i32,
    ring_bytes: usize,
) -> Result<(Vec<Opened>, Vec<SampleFormat>), SamplerError> {
    let mut opened: Vec<Opened> = Vec::new();
    let mut formats = Vec::new();
    for (event, spec) in specs.iter().enumerate() {
        let mut attr = spec.attr.clone();
        if attr.sample_type == 0 {
            attr.sample_type = SAMPLE_TYPE;
        }
        let format = SampleFormat::new(attr.sample_type).map_err(|error| {
            close_all(sys, &opened);
            SamplerError::Format { event: spec.name.clone(), error }
        })?;
        formats.push(format);
        if attr.sample_period == 0 {
            attr.sample_period = options.frequency.max(1);
            attr.freq = true;
        }
        // Wake the reader when a quarter of the ring is full; the poll interval bounds the
        // delay otherwise.
        attr.watermark = true;
        attr.wakeup = (ring_bytes / 4) as u32;
        attr.disabled = true;
        attr.enable_on_exec = matches!(target, Target::Task { on_exec: true, .. });
        attr.inherit = matches!(target, Target::Task { .. }) && !options.task_cpus.is_empty();
        // The event's count of dropped samples, exact even when the kernel has not yet
        // written the LOST record (it writes one only once the ring has room again).
        attr.read_format = FORMAT_LOST;
        for cpu in sample_cpus(spec, target, options) {
            let raw_cpu = cpu.map_or(-1, |c| c as i32);
            let mut result = sys.perf_event_open(&attr, pid, raw_cpu, -1);
            if result == Err(Errno(libc::EINVAL)) && attr.read_format != 0 {
                // Kernels before 6.0 refuse PERF_FORMAT_LOST; LOST records still count.
                attr.read_format = 0;
                result = sys.perf_event_open(&attr, pid, raw_cpu, -1);
            }
            match result {
                Ok(fd) => opened.push(Opened { event, cpu, fd }),
                Err(errno) => {
                    close_all(sys, &opened);
                    return Err(SamplerError::Open {
                        event: spec.name.clone(),
                        cpu,
                        errno,
                        hint: explain_open(errno),
                    });
                }
            }
        }
    }
    Ok((opened, formats))
}

/// The CPUs `spec` is opened on for `target` (`None`: the task on any CPU). A hybrid PMU
/// exists only on its own CPUs (ENOENT elsewhere), for task events opened per CPU too.
fn sample_cpus(spec: &SampleSpec, target: &Target, options: &SamplerOptions) -> Vec<Option<u32>> {
    let allowed = |c: &&u32| spec.cpus.as_ref().is_none_or(|allowed| allowed.contains(c));
    match target {
        Target::Task { .. } if options.task_cpus.is_empty() => vec![None],
        Target::Task { .. } | Target::Threads(_) => {
            options.task_cpus.iter().filter(allowed).map(|&c| Some(c)).collect()
        }
        Target::Cpus(cpus) => cpus.iter().filter(allowed).map(|&c| Some(c)).collect(),
    }
}

/// Maps a ring of `len` bytes for every opened event; on a refusal, closes everything and
/// says which event and CPU.
fn map_rings<S: Syscalls>(
    sys: &mut S,
    specs: &[SampleSpec],
    opened: &[Opened],
    formats: &[SampleFormat],
    len: usize,
) -> Result<Vec<Ring>, SamplerError> {
    let mut rings = Vec::new();
    for o in opened {
        match sys.mmap(o.fd, len) {
            Ok(mapping) => rings.push(Ring {
                event: o.event,
                reader: Reader::new(mapping, formats[o.event]),
                live: true,
            }),
            Err(errno) => {
                drop(rings);
                close_all(sys, opened);
                return Err(SamplerError::Map {
                    event: specs[o.event].name.clone(),
                    cpu: o.cpu,
                    errno,
                    hint: explain_mmap(errno),
                });
            }
        }
    }
    Ok(rings)
}

impl<S: Syscalls> Sampler<S> {
    /// Opens every spec on every CPU of `target` (or on the task), maps the rings, starts the
    /// reader and enables the events (unless `Target::Task { on_exec: true }`, where the exec
    /// enables them). Fails with the first refusal, with everything closed again.
    pub fn start(
        mut sys: S,
        specs: &[SampleSpec],
        target: &Target,
        options: &SamplerOptions,
    ) -> Result<Sampler<S>, SamplerError> {
        if specs.is_empty() {
            return Err(SamplerError::Nothing("no events".to_string()));
        }
        let data_pages = options.data_pages.max(1).next_power_of_two();
        let page = crate::ring::page_size();
        let len = page * (1 + data_pages);
        let (pid, on_exec) = match target {
            Target::Task { pid, on_exec } => (*pid, *on_exec),
            Target::Cpus(_) => (-1, false),
            Target::Threads(_) => {
                return Err(SamplerError::Nothing(
                    "per-thread targets: sample the process (`Target::Task`) instead".to_string(),
                ));
            }
        };
        let (opened, formats) = open_all(&mut sys, specs, target, options, pid, page * data_pages)?;
        if opened.is_empty() {
            return Err(SamplerError::Nothing(
                "no selected CPU is in any event's CPU list".to_string(),
            ));
        }
        let rings = map_rings(&mut sys, specs, &opened, &formats, len)?;
        let fail = |sys: &mut S, opened: &[Opened], e: std::io::Error| {
            close_all(sys, opened);
            SamplerError::Spawn(e.to_string())
        };
        let (wake, wake_reader) = match UnixStream::pair() {
            Ok(pair) => pair,
            Err(e) => return Err(fail(&mut sys, &opened, e)),
        };
        if let Err(e) = wake_reader.set_nonblocking(true).and(wake.set_nonblocking(true)) {
            return Err(fail(&mut sys, &opened, e));
        }
        let (command_tx, command_rx) = mpsc::channel();
        let (answer_tx, answer_rx) = mpsc::channel();
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let events = names
            .iter()
            .map(|name| EventState {
                name: name.clone(),
                total: LatencyStats::new(),
                interval: LatencyStats::new(),
                hung_up: 0,
                decode_errors: 0,
                first_error: None,
            })
            .collect();
        let thread = Thread {
            rings,
            events,
            commands: command_rx,
            answers: answer_tx,
            wake: wake_reader,
            poll_interval: options.poll_interval.max(Duration::from_millis(1)),
            reader_delay: options.reader_delay,
        };
        let handle = match std::thread::Builder::new()
            .name("tmetric-tpebs".to_string())
            .spawn(move || thread.run())
        {
            Ok(handle) => handle,
            Err(e) => return Err(fail(&mut sys, &opened, e)),
        };
        let mut sampler = Sampler {
            sys,
            names,
            opened,
            commands: Some(command_tx),
            answers: answer_rx,
            wake,
            thread: Some(handle),
            seq: 0,
            answer_timeout: options.answer_timeout,
        };
        if !on_exec {
            sampler.control(true)?;
        }
        Ok(sampler)
    }

    fn control(&mut self, enable: bool) -> Result<(), SamplerError> {
        for o in self.opened.clone() {
            let result =
                if enable { self.sys.enable(o.fd, false) } else { self.sys.disable(o.fd, false) };
            if let Err(errno) = result {
                return Err(SamplerError::Control {
                    what: if enable { "enabling" } else { "disabling" },
                    event: self.names[o.event].clone(),
                    errno,
                });
            }
        }
        Ok(())
    }

    /// The descriptors open (one per event per CPU, or per event for a task).
    pub fn descriptors(&self) -> usize {
        self.opened.len()
    }

    /// The backend.
    pub fn syscalls(&mut self) -> &mut S {
        &mut self.sys
    }

    fn ask(&mut self, stop: bool) -> Result<Vec<EventReport>, SamplerError> {
        let what = if stop { "stop" } else { "read" };
        self.seq += 1;
        let seq = self.seq;
        let command = if stop { Command::Stop(seq) } else { Command::Read(seq) };
        let sent = self.commands.as_ref().is_some_and(|c| c.send(command).is_ok());
        if !sent {
            return Err(self.died());
        }
        wake(&self.wake);
        let deadline = Instant::now() + self.answer_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                // An answer to an earlier request that timed out: skip it.
                Ok(answer) if answer.seq < seq => continue,
                Ok(answer) => return Ok(answer.reports),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(SamplerError::NoAnswer { what, waited: self.answer_timeout });
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.died()),
            }
        }
    }

    /// Why the reader is gone: its panic message when it panicked.
    fn died(&mut self) -> SamplerError {
        self.commands = None;
        let message = match self.thread.take() {
            Some(handle) if handle.is_finished() => match handle.join() {
                Err(panic) => panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "it panicked".to_string()),
                Ok(()) => "it returned".to_string(),
            },
            _ => "its channel closed".to_string(),
        };
        SamplerError::ReaderDied(message)
    }

    /// Every event's statistics: totals, and the interval since the previous read (which
    /// this read ends). Waits at most the answer timeout.
    pub fn read(&mut self) -> Result<Vec<EventReport>, SamplerError> {
        let mut reports = self.ask(false)?;
        self.add_kernel_lost(&mut reports);
        Ok(reports)
    }

    /// Fills in [`EventReport::kernel_lost`] from each descriptor's `PERF_FORMAT_LOST` count.
    fn add_kernel_lost(&mut self, reports: &mut [EventReport]) {
        let mut lost: Vec<Option<u64>> = vec![Some(0); reports.len()];
        for o in &self.opened {
            let mut buf = [0u8; 16];
            let read = self.sys.read(o.fd, &mut buf);
            let value = match read {
                Ok(16) => Some(u64::from_ne_bytes(buf[8..].try_into().expect("8 bytes"))),
                _ => None,
            };
            if let Some(slot) = lost.get_mut(o.event) {
                *slot = slot.zip(value).map(|(a, b)| a + b);
            }
        }
        for (report, lost) in reports.iter_mut().zip(lost) {
            report.kernel_lost = lost;
        }
    }

    /// Disables the events, has the reader drain the rings one last time and end, and closes
    /// the descriptors; returns the final statistics. Waits at most the answer timeout (plus
    /// as long again for the thread to end); after a timeout the reader is left to finish on
    /// its own and the descriptors are closed anyway.
    pub fn stop(mut self) -> Result<Vec<EventReport>, SamplerError> {
        let disabled = self.control(false);
        let mut answer = self.ask(true);
        if let Ok(reports) = &mut answer {
            self.add_kernel_lost(reports);
        }
        if answer.is_ok()
            && let Some(handle) = self.thread.take()
        {
            let deadline = Instant::now() + self.answer_timeout;
            while !handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if handle.is_finished() {
                let _ = handle.join();
            }
        }
        disabled?;
        answer
    }
}

impl<S: Syscalls> Drop for Sampler<S> {
    fn drop(&mut self) {
        if let Some(commands) = self.commands.take() {
            self.seq += 1;
            let _ = commands.send(Command::Stop(self.seq));
            wake(&self.wake);
        }
        // The reader owns the mappings, which stay valid after their descriptors close; it
        // ends at its next wake-up.
        let opened = std::mem::take(&mut self.opened);
        close_all(&mut self.sys, &opened);
    }
}
