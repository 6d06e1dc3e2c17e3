//! Retire-latency sampling end to end: with the running kernel (cpu-clock, a software event,
//! sampled with `PERF_SAMPLE_WEIGHT_STRUCT`), and over the fake backend with heap rings the
//! test writes records into, a kernel that refuses, and a reader that does not answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tmetric_runtime::ring::{
    Header, MISC_EXACT_IP, Mapping, RECORD_LOST, RECORD_SAMPLE, SAMPLE_TYPE, Weight,
};
use tmetric_runtime::sys::TYPE_SOFTWARE;
use tmetric_runtime::{
    Attr, Errno, FakeSyscalls, Kernel, SampleSpec, Sampler, SamplerError, SamplerOptions, Syscalls,
    Target, TpebsMode, Workload,
};

use crate::helper_argv;

/// `cpu-clock` (PERF_COUNT_SW_CPU_CLOCK = 0), sampled every `period_ns` of CPU time.
fn cpu_clock(period_ns: u64) -> SampleSpec {
    SampleSpec {
        name: "cpu-clock".to_string(),
        attr: Attr { type_: TYPE_SOFTWARE, config: 0, sample_period: period_ns, ..Attr::default() },
        cpus: None,
    }
}

fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPU list");
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(lo.parse::<u32>().unwrap()..=hi.parse::<u32>().unwrap());
    }
    cpus
}

/// CPU time (user + system, clock ticks) of this process's sampler reader threads, read
/// from /proc independently of the code under test.
fn reader_ticks() -> u64 {
    let mut ticks = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "tmetric-tpebs" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        ticks += fields.get(11).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        ticks += fields.get(12).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    }
    ticks
}

#[test]
fn cpu_clock_samples_a_task_with_the_weight_struct() {
    // 1 ms of CPU per sample; the helper burns 300 ms.
    let period = 1_000_000;
    let mut workload = Workload::prepare(&helper_argv("burn:300")).expect("fork the workload");
    let target = Target::Task { pid: workload.pid(), on_exec: true };
    let cpus = online_cpus();
    let options = SamplerOptions {
        poll_interval: Duration::from_millis(20),
        task_cpus: cpus.clone(),
        ..SamplerOptions::default()
    };
    let spec = cpu_clock(period);
    assert_eq!(spec.attr.sample_type, 0, "the sampler fills in its layout");
    let mut sampler = Sampler::start(Kernel, &[spec], &target, &options)
        .expect("cpu-clock samples with WEIGHT_STRUCT on this kernel");
    assert_eq!(sampler.descriptors(), cpus.len());
    workload.start().expect("start the workload");
    let exit = workload.wait().expect("the workload ends");
    assert_eq!(exit.code(), Some(0));
    let cpu_ns = (exit.user + exit.system).as_nanos() as f64;
    let expected = cpu_ns / period as f64;

    // The task is gone: the kernel hangs its ring up, and the reader must notice without
    // spinning on a descriptor that polls ready for ever.
    let deadline = Instant::now() + Duration::from_secs(3);
    let report = loop {
        let reports = sampler.read().expect("read");
        if reports[0].hung_up == cpus.len() as u32 || Instant::now() > deadline {
            break reports[0].clone();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        report.hung_up,
        cpus.len() as u32,
        "the exited task's rings were not seen closing: {report:?}"
    );
    let before = reader_ticks();
    std::thread::sleep(Duration::from_millis(400));
    let spent = reader_ticks() - before;
    // A spinning reader would take about 40 ticks (100 Hz) of the 400 ms.
    assert!(spent <= 10, "reader threads took {spent} clock ticks in 400 ms after the hang-up");

    let started = Instant::now();
    let last = sampler.stop().expect("stop");
    assert!(started.elapsed() < Duration::from_secs(1), "stop took {:?}", started.elapsed());
    let total = report.total;
    eprintln!(
        "cpu-clock per task: {} samples for {:.1} ms of CPU (expected about {expected:.0}); weights: max {:?}",
        total.count,
        cpu_ns / 1e6,
        total.max
    );
    assert!(
        total.count as f64 >= expected * 0.7 - 3.0 && total.count as f64 <= expected * 1.3 + 3.0,
        "{} samples for {cpu_ns} ns of CPU at a 1 ms period",
        total.count
    );
    // A software event has no retire latency: the weight struct is present and zero.
    assert_eq!(
        (total.min, total.max, total.mean, total.p97),
        (Some(0.0), Some(0.0), Some(0.0), Some(0.0))
    );
    assert_eq!((total.lost, report.decode_errors), (0, 0), "{report:?}");
    assert_eq!(last[0].total.count, total.count, "no sample arrives after the task exited");
}

#[test]
fn cpu_clock_samples_every_cpu() {
    let cpus = online_cpus();
    let period = 2_000_000;
    // The attr shape of a TPEBS event: precise (software events accept and ignore it) with
    // the weight struct.
    let mut spec = cpu_clock(period);
    spec.attr.precise_ip = 1;
    let sampler =
        Sampler::start(Kernel, &[spec], &Target::Cpus(cpus.clone()), &SamplerOptions::default());
    let mut sampler = sampler.expect("per-CPU cpu-clock sampling");
    assert_eq!(sampler.descriptors(), cpus.len());
    // Keep every CPU busy: on an idle CPU the kernel stops the cpu-clock timer (NOHZ), so
    // samples would come only from the CPUs that happen to run something.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..cpus.len())
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let first = sampler.read().expect("read");
    std::thread::sleep(Duration::from_millis(200));
    let reports = sampler.stop().expect("stop");
    let elapsed = started.elapsed().as_nanos() as f64;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for thread in busy {
        thread.join().unwrap();
    }
    // cpu-clock per CPU is a timer that fires while the CPU runs.
    let expected = cpus.len() as f64 * elapsed / period as f64;
    let total = reports[0].total;
    eprintln!(
        "cpu-clock on {} CPUs: {} samples in {:.0} ms (expected about {expected:.0}), first interval {}, second {}",
        cpus.len(),
        total.count,
        elapsed / 1e6,
        first[0].interval.count,
        reports[0].interval.count
    );
    assert!(
        total.count as f64 >= expected * 0.6 && total.count as f64 <= expected * 1.2 + 4.0,
        "{} samples, expected about {expected}",
        total.count
    );
    assert_eq!(first[0].interval.count + reports[0].interval.count, total.count);
    assert!(first[0].interval.count > 0 && reports[0].interval.count > 0);
    assert_eq!(total.max, Some(0.0));
}

#[test]
fn the_kernel_refuses_weight_and_weight_struct_together() {
    let mut spec = cpu_clock(1_000_000);
    spec.attr.sample_type = (1 << 14) | (1 << 24);
    // The sampler's own decoder refuses the layout before asking the kernel ...
    let err =
        Sampler::start(Kernel, &[spec.clone()], &Target::Cpus(vec![0]), &SamplerOptions::default())
            .unwrap_err();
    assert!(err.to_string().contains("WEIGHT and WEIGHT_STRUCT"), "{err}");
    // ... and the kernel says EINVAL, as kernel/events/core.c's `perf_event_alloc` checks do.
    let attr = Attr { disabled: true, ..spec.attr };
    assert_eq!(Kernel.perf_event_open(&attr, -1, 0, -1), Err(Errno(libc::EINVAL)));
}

/// The fake kernel plus heap rings the test can write records into, as the kernel would.
#[derive(Clone, Default)]
struct RingFake {
    fake: FakeSyscalls,
    rings: Arc<Mutex<BTreeMap<i32, Mapping>>>,
}

impl RingFake {
    fn new() -> RingFake {
        RingFake { fake: FakeSyscalls::new(), rings: Arc::default() }
    }

    fn ring(&self, fd: i32) -> Mapping {
        self.rings.lock().unwrap()[&fd].share().expect("heap ring")
    }

    fn fds(&self) -> Vec<i32> {
        self.rings.lock().unwrap().keys().copied().collect()
    }
}

impl Syscalls for RingFake {
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno> {
        self.fake.perf_event_open(attr, pid, cpu, group_fd)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.fake.read(fd, buf)
    }
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.fake.enable(fd, group)
    }
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.fake.disable(fd, group)
    }
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.fake.reset(fd, group)
    }
    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        self.fake.event_id(fd)
    }
    fn close(&mut self, fd: i32) {
        self.fake.close(fd)
    }
    fn mmap(&mut self, fd: i32, len: usize) -> Result<Mapping, Errno> {
        let page = tmetric_runtime::ring::page_size();
        let ring = Mapping::heap(len - page);
        self.rings.lock().unwrap().insert(fd, ring.share().expect("heap ring"));
        Ok(ring)
    }
}

/// A producer's view of one heap ring: appends records and publishes the head.
struct Producer {
    ring: Mapping,
    head: u64,
}

impl Producer {
    fn sample(&mut self, latency: u16) {
        let mut bytes =
            Header { type_: RECORD_SAMPLE, misc: MISC_EXACT_IP, size: 56 }.to_bytes().to_vec();
        for word in [1u64, 0x40_1000, 0, 0, 0, Weight::from_parts(0, 0, latency).0] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        self.put(&bytes);
    }

    fn lost(&mut self, n: u64) {
        let mut bytes = Header { type_: RECORD_LOST, misc: 0, size: 24 }.to_bytes().to_vec();
        bytes.extend_from_slice(&1u64.to_ne_bytes());
        bytes.extend_from_slice(&n.to_ne_bytes());
        self.put(&bytes);
    }

    fn put(&mut self, bytes: &[u8]) {
        // Like the kernel, never overwrite what the reader has not released.
        let size = self.ring.data_area().unwrap().1 as u64;
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.head + bytes.len() as u64 - self.ring.data_tail() > size {
            assert!(Instant::now() < deadline, "the reader never released the ring");
            std::thread::sleep(Duration::from_millis(1));
        }
        self.ring.write_data(self.head, bytes);
        self.head += bytes.len() as u64;
        self.ring.publish_head(self.head);
    }
}

fn fake_spec(name: &str, config: u64, cpus: Option<Vec<u32>>) -> SampleSpec {
    SampleSpec {
        name: name.to_string(),
        attr: Attr { type_: 4, config, precise_ip: 1, ..Attr::default() },
        cpus,
    }
}

#[test]
fn samples_written_to_the_rings_give_known_statistics() {
    let sys = RingFake::new();
    let options = SamplerOptions {
        data_pages: 1,
        poll_interval: Duration::from_millis(5),
        ..SamplerOptions::default()
    };
    let specs =
        [fake_spec("STLB_HIT_STORES", 0x20cd, None), fake_spec("OTHER", 0x11, Some(vec![1]))];
    let mut sampler =
        Sampler::start(sys.clone(), &specs, &Target::Cpus(vec![0, 1]), &options).expect("start");
    // The first event on CPUs 0 and 1, the second only on CPU 1.
    assert_eq!(sampler.descriptors(), 3);
    let opens: Vec<Attr> = sys
        .fake
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            tmetric_runtime::fake::Call::Open { attr, .. } => Some(attr),
            _ => None,
        })
        .collect();
    assert_eq!(opens.len(), 3);
    for attr in &opens {
        assert_eq!(attr.sample_type, SAMPLE_TYPE);
        assert_eq!((attr.sample_period, attr.freq), (4000, true));
        assert_eq!(attr.precise_ip, 1);
        assert_eq!(attr.read_format, 0x10, "PERF_FORMAT_LOST");
        assert!(attr.disabled && attr.watermark && !attr.inherit);
    }
    let fds = sys.fds();
    let mut cpu0 = Producer { ring: sys.ring(fds[0]), head: 0 };
    let mut cpu1 = Producer { ring: sys.ring(fds[1]), head: 0 };
    let mut other = Producer { ring: sys.ring(fds[2]), head: 0 };
    // 200 samples on CPU 0 (several laps of the 4 KiB ring: 56-byte records): latencies
    // 1..=200; then 2 more on CPU 1 and a lost record.
    for latency in 1..=200u16 {
        cpu0.sample(latency);
    }
    cpu1.sample(1000);
    cpu1.lost(7);
    cpu1.sample(500);
    other.sample(42);
    let reports = sampler.read().expect("read");
    let stlb = &reports[0];
    assert_eq!(stlb.name, "STLB_HIT_STORES");
    let t = stlb.total;
    assert_eq!((t.count, t.lost), (202, 7));
    let sum: u32 = (1..=200).sum::<u32>() + 1500;
    assert_eq!(t.mean, Some(f64::from(sum) / 202.0));
    assert_eq!((t.min, t.max), (Some(1.0), Some(1000.0)));
    // tail_count(202) = floor(195.94 + 0.5) = 196: the values 1..=196.
    assert_eq!(t.p97, Some(f64::from((1..=196).sum::<u32>()) / 196.0));
    assert_eq!(t.value(TpebsMode::Max), Some(1000.0));
    assert_eq!(stlb.interval, t);
    assert_eq!((reports[1].total.count, reports[1].total.last), (1, Some(42.0)));
    assert_eq!(stlb.decode_errors, 0);
    // The fake's read() has no PERF_FORMAT_LOST word, so the kernel's count is unknown.
    assert_eq!(stlb.kernel_lost, None);

    // The next interval holds only what came after the read.
    cpu0.sample(9);
    let last = sampler.stop().expect("stop");
    assert_eq!(
        (last[0].interval.count, last[0].interval.mean, last[0].interval.lost),
        (1, Some(9.0), 0)
    );
    assert_eq!(last[0].total.count, 203);
    assert_eq!(last[1].interval.count, 0);
    assert_eq!(sys.fake.open_count(), 0, "stop closes every descriptor");
}

#[test]
fn garbage_in_a_ring_is_reported_not_fatal() {
    let sys = RingFake::new();
    let options = SamplerOptions {
        data_pages: 1,
        poll_interval: Duration::from_millis(5),
        ..SamplerOptions::default()
    };
    let mut sampler =
        Sampler::start(sys.clone(), &[fake_spec("X", 1, None)], &Target::Cpus(vec![0]), &options)
            .expect("start");
    let mut producer = Producer { ring: sys.ring(sys.fds()[0]), head: 0 };
    producer.put(&Header { type_: RECORD_SAMPLE, misc: 0, size: 0 }.to_bytes());
    let reports = sampler.read().expect("read");
    assert_eq!(reports[0].decode_errors, 1);
    assert!(reports[0].first_error.as_deref().unwrap().contains("claims 0 bytes"), "{reports:?}");
    // The reader skipped to the head, so the next records decode.
    producer.sample(77);
    let reports = sampler.stop().expect("stop");
    assert_eq!((reports[0].total.count, reports[0].total.last), (1, Some(77.0)));
}

#[test]
fn a_refused_open_fails_at_once_with_nothing_left_open() {
    let sys = RingFake::new();
    sys.fake.fail_on_cpu(4, 0x20cd, 1, libc::EOPNOTSUPP);
    let started = Instant::now();
    let err = Sampler::start(
        sys.clone(),
        &[fake_spec("MEM_INST_RETIRED.STLB_HIT_STORES", 0x20cd, None)],
        &Target::Cpus(vec![0, 1]),
        &SamplerOptions::default(),
    )
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(err, SamplerError::Open { cpu: Some(1), errno: Errno(libc::EOPNOTSUPP), .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "cannot start retire-latency sampling: the kernel refused to open `MEM_INST_RETIRED.STLB_HIT_STORES` on CPU 1: EOPNOTSUPP (Operation not supported); the PMU cannot sample this way: precise_ip above caps/max_precise (no PEBS, as in most VMs), or sampling unsupported by the PMU"
    );
    assert_eq!(sys.fake.open_count(), 0, "the CPU 0 descriptor is closed again");
}

#[test]
fn a_backend_without_rings_fails_at_once_with_nothing_left_open() {
    // FakeSyscalls keeps the trait's default mmap, which refuses with ENOSYS.
    let fake = FakeSyscalls::new();
    let err = Sampler::start(
        fake.clone(),
        &[fake_spec("X", 1, None)],
        &Target::Task { pid: 1234, on_exec: false },
        &SamplerOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, SamplerError::Map { cpu: None, errno: Errno(libc::ENOSYS), .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("mapping the ring buffer of `X` failed: ENOSYS"), "{err}");
    assert_eq!(fake.open_count(), 0);
    let err =
        Sampler::start(fake, &[], &Target::Cpus(vec![0]), &SamplerOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "retire-latency sampling has nothing to open: no events");
}

#[test]
fn a_reader_that_stops_answering_ends_with_a_message_in_bounded_time() {
    let sys = RingFake::new();
    let options = SamplerOptions {
        answer_timeout: Duration::from_millis(150),
        // Stands in for a reader that is stuck or starved: it answers only after 3 s.
        reader_delay: Duration::from_secs(3),
        poll_interval: Duration::from_millis(5),
        ..SamplerOptions::default()
    };
    let mut sampler =
        Sampler::start(sys.clone(), &[fake_spec("X", 1, None)], &Target::Cpus(vec![0]), &options)
            .expect("start");
    let started = Instant::now();
    let err = sampler.read().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "read took {:?}", started.elapsed());
    assert_eq!(
        err.to_string(),
        "the retire-latency reader did not answer within 150 ms when asked to read; its samples since the last answer are not counted"
    );
    let started = Instant::now();
    let err = sampler.stop().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "stop took {:?}", started.elapsed());
    assert!(matches!(err, SamplerError::NoAnswer { what: "stop", .. }), "{err:?}");
    assert_eq!(sys.fake.open_count(), 0, "the descriptors are closed even so");
}

#[test]
fn precise_sampling_without_a_hardware_pmu_fails_with_the_reason() {
    // This VM has no hardware PMU (no `cpu` PMU in sysfs): cycles cannot be opened at all, and
    // the sampler says so at once, naming the event and the CPU.
    if std::path::Path::new("/sys/bus/event_source/devices/cpu").exists() {
        eprintln!("skipped: this machine has a hardware PMU");
        return;
    }
    let spec = SampleSpec {
        name: "cpu/cycles/p".to_string(),
        attr: Attr { type_: 0, config: 0, precise_ip: 1, ..Attr::default() },
        cpus: None,
    };
    let started = Instant::now();
    let err = Sampler::start(Kernel, &[spec], &Target::Cpus(vec![0]), &SamplerOptions::default())
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(err, SamplerError::Open { cpu: Some(0), errno: Errno(libc::ENOENT), .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("`cpu/cycles/p` on CPU 0: ENOENT"), "{err}");
}

#[test]
fn a_ring_the_reader_leaves_full_counts_lost_samples() {
    // One data page (73 records of 56 bytes) on CPU 0, cpu-clock every 200 µs, and a reader
    // that sleeps 500 ms before each answer: the ring overflows while it sleeps, and the
    // kernel counts what it dropped.
    let period = 200_000;
    let options = SamplerOptions {
        data_pages: 1,
        poll_interval: Duration::from_millis(10),
        reader_delay: Duration::from_millis(500),
        answer_timeout: Duration::from_secs(3),
        ..SamplerOptions::default()
    };
    let started = Instant::now();
    let mut sampler =
        Sampler::start(Kernel, &[cpu_clock(period)], &Target::Cpus(vec![0]), &options)
            .expect("cpu-clock sampling on CPU 0");
    std::thread::sleep(Duration::from_millis(50));
    sampler.read().expect("read, answered after the reader's sleep");
    // stop disables the event first: the sampled span ends here.
    let elapsed = started.elapsed().as_nanos() as f64;
    let reports = sampler.stop().expect("stop");
    let report = &reports[0];
    let total = report.total;
    let periods = elapsed / period as f64;
    let kernel_lost = report.kernel_lost.expect("PERF_FORMAT_LOST (Linux 6.0 and later)");
    eprintln!(
        "full ring: {} samples kept, {kernel_lost} lost (LOST records: {}), {} throttles, {periods:.0} periods in {:.0} ms",
        total.count,
        total.lost,
        total.throttles,
        elapsed / 1e6
    );
    assert!(kernel_lost > total.count, "most samples were dropped while the reader slept");
    assert!(total.count > 0);
    // LOST records can only trail the kernel's count.
    assert!(total.lost <= kernel_lost);
    // Kept plus lost cannot exceed the timer's periods. (It may fall short: a cpu-clock timer
    // served late skips the periods it missed, and throttling drops some.)
    let seen = (total.count + kernel_lost) as f64;
    assert!(seen <= periods * 1.2 + 10.0, "{seen} records for {periods} periods");
    // How well a 200 µs timer keeps up depends on the host: kept plus lost was 2,752 of
    // 2,753 periods on one KVM guest, 1,319 of 2,755 (48%) on another, idle, whose timer was
    // served late. Kept samples alone were 12% there: lost records not counted would fail.
    assert!(seen >= periods * 0.3, "{seen} records for {periods} periods");
}

#[test]
fn a_dropped_sampler_closes_its_descriptors_without_waiting() {
    let sys = RingFake::new();
    let options =
        SamplerOptions { reader_delay: Duration::from_secs(3), ..SamplerOptions::default() };
    let sampler = Sampler::start(
        sys.clone(),
        &[fake_spec("X", 1, None)],
        &Target::Cpus(vec![0, 1]),
        &options,
    )
    .expect("start");
    assert_eq!(sys.fake.open_count(), 2);
    let started = Instant::now();
    drop(sampler);
    assert!(started.elapsed() < Duration::from_millis(500), "drop took {:?}", started.elapsed());
    assert_eq!(sys.fake.open_count(), 0);
}
