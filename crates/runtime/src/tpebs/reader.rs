//! The sampler's reader thread: drains every ring into its event's statistics, sleeps in
//! `poll(2)` for at most the poll interval, drops rings the kernel hung up, and answers the
//! sampler's read and stop commands after a fresh drain.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use super::{EventReport, LatencyStats};
use crate::ring::{Reader, Record};

pub(super) enum Command {
    Read(u64),
    Stop(u64),
}

pub(super) struct Answer {
    pub(super) seq: u64,
    pub(super) reports: Vec<EventReport>,
}

pub(super) struct Ring {
    pub(super) event: usize,
    pub(super) reader: Reader,
    pub(super) live: bool,
}

pub(super) struct EventState {
    pub(super) name: String,
    pub(super) total: LatencyStats,
    pub(super) interval: LatencyStats,
    pub(super) hung_up: u32,
    pub(super) decode_errors: u64,
    pub(super) first_error: Option<String>,
}

impl EventState {
    fn report(&mut self, reset: bool) -> EventReport {
        let report = EventReport {
            name: self.name.clone(),
            total: self.total.summary(),
            interval: self.interval.summary(),
            hung_up: self.hung_up,
            decode_errors: self.decode_errors,
            first_error: self.first_error.clone(),
            kernel_lost: None,
        };
        if reset {
            self.interval = LatencyStats::new();
        }
        report
    }
}

/// Hands one record to its event's statistics (the ring names the event: one event per ring).
fn account(event: &mut EventState, record: Record) {
    match record {
        Record::Sample(sample) => {
            let latency = sample.weight.map_or(0, |w| w.var3_w());
            event.total.add(latency);
            event.interval.add(latency);
        }
        Record::Lost { lost, .. } => {
            event.total.add_lost(lost);
            event.interval.add_lost(lost);
        }
        Record::Throttle { throttle: true, .. } => {
            event.total.add_throttle();
            event.interval.add_throttle();
        }
        Record::Throttle { throttle: false, .. } | Record::Other(_) => {}
    }
}

/// Decodes every ring into its event's statistics; returns the number of records.
fn drain_rings(rings: &mut [Ring], events: &mut [EventState]) -> u64 {
    let mut records = 0;
    for ring in rings.iter_mut() {
        let event = &mut events[ring.event];
        let walk = ring.reader.drain(|record| account(event, record));
        records += walk.records;
        if let Some(error) = walk.error {
            event.decode_errors += 1;
            event.first_error.get_or_insert_with(|| error.to_string());
        }
    }
    records
}

pub(super) struct Thread {
    pub(super) rings: Vec<Ring>,
    pub(super) events: Vec<EventState>,
    pub(super) commands: Receiver<Command>,
    pub(super) answers: Sender<Answer>,
    pub(super) wake: UnixStream,
    pub(super) poll_interval: Duration,
    pub(super) reader_delay: Duration,
}

impl Thread {
    pub(super) fn run(mut self) {
        loop {
            let hung = self.wait();
            drain_rings(&mut self.rings, &mut self.events);
            // Rings the kernel closed are drained above and polled no more.
            for k in hung {
                if self.rings[k].live {
                    self.rings[k].live = false;
                    self.events[self.rings[k].event].hung_up += 1;
                }
            }
            loop {
                match self.commands.try_recv() {
                    Ok(Command::Read(seq)) => self.answer(seq),
                    Ok(Command::Stop(seq)) => {
                        drain_rings(&mut self.rings, &mut self.events);
                        self.answer(seq);
                        return;
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            }
        }
    }

    fn answer(&mut self, seq: u64) {
        if !self.reader_delay.is_zero() {
            std::thread::sleep(self.reader_delay);
        }
        let reports = self.events.iter_mut().map(|e| e.report(true)).collect();
        // The sampler may have given up waiting and gone; nothing to do then.
        let _ = self.answers.send(Answer { seq, reports });
    }

    /// Sleeps until a ring has data, a command arrives or the interval passes; returns the
    /// rings the kernel hung up.
    fn wait(&mut self) -> Vec<usize> {
        let mut fds =
            vec![libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        let mut which = Vec::new();
        for (k, ring) in self.rings.iter().enumerate() {
            if let (true, Some(fd)) = (ring.live, ring.reader.mapping().fd()) {
                fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
                which.push(k);
            }
        }
        let timeout = self.poll_interval.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs that poll may write.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n <= 0 {
            // Timeout, or EINTR: drain anyway; the next wait is bounded again.
            return Vec::new();
        }
        if fds[0].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!(self.wake.read(&mut sink), Ok(n) if n > 0) {}
        }
        let closed = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        fds[1..]
            .iter()
            .zip(which)
            .filter(|(p, _)| p.revents & closed != 0)
            .map(|(_, k)| k)
            .collect()
    }
}
