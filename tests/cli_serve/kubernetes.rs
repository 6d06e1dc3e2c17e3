//! Pod cgroups named from a fake kubelet log directory (`--kubelet-log-dir`): real cgroups in
//! the kubelet's systemd-driver and cgroupfs-driver layouts, `tmetric_cgroup_kubernetes_info`
//! on /metrics, the documented join evaluated by a real Prometheus, and a pod whose
//! directories go away losing its names.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli_cgroup::{Cgroup, mount};

use super::{KillOnDrop, Prometheus, Serve, prometheus_missing, promtool_metrics};

const UID: &str = "12345678-1234-1234-1234-123456789abc";
const UID2: &str = "87654321-4321-4321-4321-cba987654321";

/// Directories made under the cgroup mount, removed deepest first when dropped.
struct Tree(Vec<PathBuf>);

impl Drop for Tree {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn make_tree(mount: &Path, paths: &[String]) -> Tree {
    let mut made = Vec::new();
    for p in paths {
        let mut dir = mount.to_path_buf();
        for comp in p.split('/').filter(|c| !c.is_empty()) {
            dir.push(comp);
            if !made.contains(&dir) {
                std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
                made.push(dir.clone());
            }
        }
    }
    Tree(made)
}

/// `serve`'s sample of `series` (labels as rendered) on `text`, if there.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn pod_cgroups_get_kubernetes_names_from_the_kubelets_log_directories() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let root = format!("/tmetric-test-k8s-{}", std::process::id());
    let (app_id, db_id) = ("a".repeat(64), "b".repeat(64));
    let pod = format!(
        "{root}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
        UID.replace('-', "_")
    );
    let app = format!("{pod}/cri-containerd-{app_id}.scope");
    let db = format!("{root}/kubepods/besteffort/pod{UID2}/crio-{db_id}");
    let _tree = make_tree(&mount, &[app.clone(), db.clone()]);
    let logs = tempfile::tempdir().unwrap();
    let l = logs.path();
    std::fs::create_dir_all(l.join(format!("pods/shop_web-7d9f_{UID}/app"))).unwrap();
    std::fs::create_dir_all(l.join(format!("pods/data_db-0_{UID2}/db"))).unwrap();
    // Names Kubernetes would never make: never on /metrics.
    std::fs::create_dir_all(l.join(format!("pods/evil\"ns_x_{UID2}"))).unwrap();
    std::fs::create_dir_all(l.join("containers")).unwrap();
    let link = |name: String, target: String| {
        std::os::unix::fs::symlink(target, l.join("containers").join(name)).unwrap();
    };
    link(
        format!("web-7d9f_shop_app-{app_id}.log"),
        format!("/var/log/pods/shop_web-7d9f_{UID}/app/0.log"),
    );
    link(format!("db-0_data_db-{db_id}.log"), format!("/var/log/pods/data_db-0_{UID2}/db/1.log"));
    // The app container busy, so its cgroup's task-clock is real.
    let leaf = Cgroup { path: mount.join(&app[1..]), name: app[1..].to_string() };
    let spinner = KillOnDrop(leaf.spin(60_000));
    let logs_arg = l.display().to_string();
    let serve = Serve::start(&[
        "-M",
        "Software",
        "--cgroup",
        &format!("{root}/**"),
        "--no-host",
        "--interval",
        "1s",
        "--reads",
        "2",
        "--kubelet-log-dir",
        &logs_arg,
    ]);
    let prom = prometheus_missing().is_none().then(|| Prometheus::start(&serve.addr, 250, None));
    serve.json_after(2);
    let (_, text) = serve.get("/metrics");
    let info = |cgroup: &str, rest: &str| {
        format!("tmetric_cgroup_kubernetes_info{{cgroup=\"{cgroup}\",{rest}}}")
    };
    let app_info = info(
        &app,
        &format!("namespace=\"shop\",pod=\"web-7d9f\",container=\"app\",pod_uid=\"{UID}\""),
    );
    assert_eq!(sample(&text, &app_info), Some(1.0), "{text}");
    let pod_info = info(&pod, &format!("namespace=\"shop\",pod=\"web-7d9f\",pod_uid=\"{UID}\""));
    assert_eq!(sample(&text, &pod_info), Some(1.0), "{text}");
    let db_info =
        info(&db, &format!("namespace=\"data\",pod=\"db-0\",container=\"db\",pod_uid=\"{UID2}\""));
    assert_eq!(sample(&text, &db_info), Some(1.0), "{text}");
    // The slices above the pods are not pods'; the planted name is nowhere.
    let named = text.lines().filter(|l| l.starts_with("tmetric_cgroup_kubernetes_info{")).count();
    assert_eq!(named, 4, "{text}");
    assert!(!text.contains("evil"), "{text}");
    if prom.is_none() {
        eprintln!("the join through Prometheus is skipped: {}", prometheus_missing().unwrap());
    }
    if let Some(prom) = &prom {
        promtool_metrics(&text).unwrap();
        // The join docs/serve.md gives, with tmetric's own value.
        let join = "tmetric_cpus_utilized * on (instance, cgroup) group_left (namespace, pod, container) tmetric_cgroup_kubernetes_info{container=\"app\"}";
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = prom.wait_for(join);
            assert_eq!(r.len(), 1, "{r:?}");
            assert_eq!(r[0].0["namespace"], "shop");
            assert_eq!(r[0].0["pod"], "web-7d9f");
            assert_eq!(r[0].0["pod_uid"], UID);
            let (_, now) = serve.get("/metrics");
            let prefix = format!("tmetric_cpus_utilized{{cgroup=\"{app}\",");
            let line = now.lines().find(|l| l.starts_with(&prefix));
            let line = line.unwrap_or_else(|| panic!("no {prefix} in {now}"));
            let mine: f64 = line.rsplit_once(' ').unwrap().1.parse().unwrap();
            // The busy shell keeps most of a CPU on an idle machine, and more than a twentieth
            // of one even when twenty other jobs share the two CPUs (0.10 to 0.14 measured).
            assert!(mine > 0.05, "{mine}");
            if r[0].1 == mine {
                break;
            }
            assert!(Instant::now() < deadline, "Prometheus's join {} never met {mine}", r[0].1);
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    // The db pod goes away from the log directories: its names go at the next interval, and
    // the other pod keeps its own.
    std::fs::remove_dir_all(l.join(format!("pods/data_db-0_{UID2}"))).unwrap();
    std::fs::remove_file(l.join(format!("containers/db-0_data_db-{db_id}.log"))).unwrap();
    let n = serve.json_after(0)["interval"]["number"].as_u64().unwrap();
    let view = serve.json_after(n + 1);
    let (_, text) = serve.get("/metrics");
    assert_eq!(sample(&text, &db_info), None, "{text}");
    assert_eq!(sample(&text, &app_info), Some(1.0), "{text}");
    let target = view["targets"].as_array().unwrap().iter().find(|t| t["cgroup"] == app.as_str());
    let k = &target.unwrap()["kubernetes"];
    assert_eq!(k["container"], "app", "{view}");
    drop(spinner);
}

#[test]
fn without_the_kubelets_directories_the_note_says_what_to_do() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let root = format!("/tmetric-test-k8s-none-{}", std::process::id());
    let _tree = make_tree(&mount, &[format!("{root}/kubepods/pod{UID}")]);
    let missing = tempfile::tempdir().unwrap();
    let dir = missing.path().join("not-mounted");
    let out = crate::support::tmetric(&[
        "serve",
        "--once",
        "-M",
        "Software",
        "--no-host",
        "--interval",
        "200ms",
        "--cgroup",
        &format!("{root}/**"),
        "--kubelet-log-dir",
        dir.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    assert!(!text.contains("tmetric_cgroup_kubernetes_info{"), "{text}");
    let note = format!(
        "tmetric_note_info{{note=\"Kubernetes names: cannot read {}/pods: No such file or directory (os error 2); mount the node's directory there read-only",
        dir.display()
    );
    assert!(text.contains(&note), "{text}");
    assert!(text.contains("or join kube_pod_info on pod_uid"), "{text}");
    // The labels from the path stay, for the join with kube-state-metrics.
    assert!(text.contains(&format!("pod_uid=\"{UID}\"")), "{text}");
}
