//! Kubernetes names (namespace, pod, container) of pod cgroups, read without a network call
//! from the directories the kubelet keeps on every node: `<dir>/pods/<namespace>_<pod>_<uid>/`
//! maps a pod uid to its namespace and name, and the links
//! `<dir>/containers/<pod>_<namespace>_<container>-<container id>.log` map a container id to
//! its names. Only directory listings and link texts are read: no file is opened, no link
//! followed, and a name Kubernetes would not have made is skipped, never exported.

use std::collections::HashMap;
use std::path::Path;

use crate::cgroups::{is_container_id, is_uid};

/// At most this many entries are read from each directory: a node with more is cut, and the
/// cut is said.
pub const MAX_ENTRIES: usize = 100_000;

/// A pod's names, by its uid.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodNames {
    namespace: String,
    pod: String,
}

/// A container's names, by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ContainerNames {
    namespace: String,
    pod: String,
    container: String,
    /// The pod uid the link points into, when its target has the kubelet's shape.
    pod_uid: Option<String>,
}

/// What the kubelet's log directories said at the last read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pods: HashMap<String, PodNames>,
    containers: HashMap<String, ContainerNames>,
    /// Why names could not be read (or not all of them), each naming the path, what was
    /// expected and what to do: for `/metrics`' notes.
    pub problems: Vec<String>,
}

/// The Kubernetes names of one cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name; `None` for a pod's own cgroup and for its sandbox.
    pub container: Option<String>,
    /// The pod's uid.
    pub pod_uid: String,
}

impl Names {
    /// Reads `dir/pods` and `dir/containers` (`dir` is `--kubelet-log-dir`, `/var/log` on a
    /// node). A directory that is missing, a link or not a directory is said in `problems`
    /// and nothing of it is used.
    pub fn read(dir: &Path) -> Names {
        let mut names = Names::default();
        if let Some(entries) = listing(&dir.join("pods"), &mut names.problems) {
            let mut ambiguous = Vec::new();
            for (name, is_dir) in entries {
                let Some((uid, pod)) = is_dir.then(|| pod_dir(&name)).flatten() else { continue };
                match names.pods.get(&uid) {
                    Some(known) if *known != pod => ambiguous.push(uid),
                    _ => {
                        names.pods.insert(uid, pod);
                    }
                }
            }
            // Two directories naming one uid differently: neither is believed.
            for uid in ambiguous {
                names.pods.remove(&uid);
            }
        }
        let containers = dir.join("containers");
        if let Some(entries) = listing(&containers, &mut names.problems) {
            let mut ambiguous = Vec::new();
            for (name, _) in entries {
                let Some((id, mut found)) = container_link(&name) else { continue };
                // The link's text only: `read_link` does not follow it.
                if let Ok(target) = std::fs::read_link(containers.join(&name)) {
                    match link_target(&target) {
                        Some((pod, container, uid))
                            if pod.namespace == found.namespace
                                && pod.pod == found.pod
                                && container == found.container =>
                        {
                            found.pod_uid = Some(uid);
                        }
                        // A target of the kubelet's shape that names another pod or
                        // container than the link's own name: neither is believed.
                        Some(_) => continue,
                        None => {}
                    }
                }
                match names.containers.get(&id) {
                    Some(known) if *known != found => ambiguous.push(id),
                    _ => {
                        names.containers.insert(id, found);
                    }
                }
            }
            for id in ambiguous {
                names.containers.remove(&id);
            }
        }
        names
    }

    /// The names of the cgroup whose path labels (`cgroups::labels_of`) are `labels`: the pod
    /// by its uid, the container by its id. `None` when neither is known, or when what the
    /// two directories say disagrees (a wrong name is worse than none).
    pub fn of(&self, labels: &[(&'static str, String)]) -> Option<Named> {
        let get = |key: &str| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str());
        let uid = get("pod_uid").map(str::to_ascii_lowercase);
        let by_uid = uid.as_ref().and_then(|u| self.pods.get(u));
        let by_id = get("container_id")
            .and_then(|id| self.containers.get(&id.to_ascii_lowercase()))
            .filter(|c| {
                by_uid.is_none_or(|p| p.namespace == c.namespace && p.pod == c.pod)
                    && match (&uid, &c.pod_uid) {
                        (Some(a), Some(b)) => a == b,
                        _ => true,
                    }
            });
        let (namespace, pod) = match (by_uid, by_id) {
            (Some(p), _) => (p.namespace.clone(), p.pod.clone()),
            (None, Some(c)) => (c.namespace.clone(), c.pod.clone()),
            (None, None) => return None,
        };
        let pod_uid = uid.or_else(|| by_id.and_then(|c| c.pod_uid.clone())).unwrap_or_default();
        Some(Named { namespace, pod, container: by_id.map(|c| c.container.clone()), pod_uid })
    }
}

/// Whether a cgroup's path labels make it a pod's (so names are worth reading).
pub fn is_pod(labels: &[(&'static str, String)]) -> bool {
    labels.iter().any(|(k, _)| *k == "pod_uid" || *k == "container_id")
}

/// The UTF-8 names in directory `path` and whether each is a directory (by the listing's
/// file type: a link is not one), at most [`MAX_ENTRIES`]. `None`, with the problem said,
/// when `path` is missing, a link or not a directory, or cannot be listed.
fn listing(path: &Path, problems: &mut Vec<String>) -> Option<Vec<(String, bool)>> {
    let shown = path.display();
    let remedy = "mount the node's directory there read-only (packaging/kubernetes/tmetric.yaml does), give --kubelet-log-dir, or join kube_pod_info on pod_uid (docs/serve.md, \"Kubernetes\")";
    match std::fs::symlink_metadata(path) {
        Err(e) => {
            problems.push(format!("Kubernetes names: cannot read {shown}: {e}; {remedy}"));
            return None;
        }
        Ok(m) if m.file_type().is_symlink() => {
            problems.push(format!(
                "Kubernetes names: {shown} is a link, which is not followed: expected the kubelet's directory; {remedy}"
            ));
            return None;
        }
        Ok(m) if !m.is_dir() => {
            problems.push(format!(
                "Kubernetes names: {shown} is not a directory: expected the kubelet's; {remedy}"
            ));
            return None;
        }
        Ok(_) => {}
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(format!("Kubernetes names: cannot list {shown}: {e}; {remedy}"));
            return None;
        }
    };
    let mut out = Vec::new();
    for e in entries.filter_map(Result::ok) {
        if out.len() == MAX_ENTRIES {
            problems.push(format!(
                "Kubernetes names: {shown} has more than {MAX_ENTRIES} entries; the rest are not read"
            ));
            break;
        }
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if let Ok(name) = e.file_name().into_string() {
            out.push((name, is_dir));
        }
    }
    Some(out)
}

/// `<namespace>_<pod>_<uid>`: the uid (lower case) and the names.
fn pod_dir(name: &str) -> Option<(String, PodNames)> {
    let mut parts = name.split('_');
    let (namespace, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    let valid = parts.next().is_none() && dns_label(namespace) && dns_subdomain(pod) && is_uid(uid);
    valid.then(|| {
        (uid.to_ascii_lowercase(), PodNames { namespace: namespace.into(), pod: pod.into() })
    })
}

/// `<pod>_<namespace>_<container>-<container id>.log`: the id (lower case) and the names.
fn container_link(name: &str) -> Option<(String, ContainerNames)> {
    let (names, id) = name.strip_suffix(".log")?.rsplit_once('-')?;
    let mut parts = names.split('_');
    let (pod, namespace, container) = (parts.next()?, parts.next()?, parts.next()?);
    let valid = parts.next().is_none()
        && dns_subdomain(pod)
        && dns_label(namespace)
        && dns_label(container)
        && is_container_id(id);
    valid.then(|| {
        let names = ContainerNames {
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
            pod_uid: None,
        };
        (id.to_ascii_lowercase(), names)
    })
}

/// A container link's target, `.../<namespace>_<pod>_<uid>/<container>/<restarts>.log`: the
/// pod, the container and the uid, when it has that shape.
fn link_target(target: &Path) -> Option<(PodNames, String, String)> {
    let comps: Vec<&str> = target.iter().filter_map(|c| c.to_str()).collect();
    let [.., pod_dir_name, container, file] = comps.as_slice() else { return None };
    let restarts = file.strip_suffix(".log")?;
    if restarts.is_empty() || !restarts.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (uid, pod) = pod_dir(pod_dir_name)?;
    dns_label(container).then(|| (pod, container.to_string(), uid))
}

/// A DNS-1123 label (namespaces, container names): at most 63 of `a-z`, `0-9` and `-`,
/// starting and ending with a letter or digit.
fn dns_label(s: &str) -> bool {
    s.len() <= 63 && label_chars(s)
}

/// A DNS-1123 subdomain (pod names): at most 253 characters, labels joined by `.`.
fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(label_chars)
}

fn label_chars(s: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::labels_of;
    use std::os::unix::fs::symlink;

    const UID: &str = "12345678-1234-1234-1234-123456789abc";
    const STATIC: &str = "0123456789abcdef0123456789abcdef";

    fn id(c: char) -> String {
        c.to_string().repeat(64)
    }

    /// A node's log directory: one pod with two containers (containerd, systemd driver), a
    /// static pod (cri-o, cgroupfs driver) with one.
    fn node() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for c in ["app", "sidecar"] {
            std::fs::create_dir_all(d.join(format!("pods/shop_web-7d9f_{UID}/{c}"))).unwrap();
        }
        std::fs::create_dir_all(d.join(format!("pods/kube-system_etcd-node1_{STATIC}/etcd")))
            .unwrap();
        std::fs::create_dir_all(d.join("containers")).unwrap();
        let link = |pod: &str, ns: &str, c: &str, cid: &str, target: String| {
            symlink(target, d.join(format!("containers/{pod}_{ns}_{c}-{cid}.log"))).unwrap();
        };
        link(
            "web-7d9f",
            "shop",
            "app",
            &id('a'),
            format!("/var/log/pods/shop_web-7d9f_{UID}/app/0.log"),
        );
        link(
            "web-7d9f",
            "shop",
            "sidecar",
            &id('b'),
            format!("/var/log/pods/shop_web-7d9f_{UID}/sidecar/2.log"),
        );
        link(
            "etcd-node1",
            "kube-system",
            "etcd",
            &id('c'),
            format!("/var/log/pods/kube-system_etcd-node1_{STATIC}/etcd/0.log"),
        );
        dir
    }

    fn named(ns: &str, pod: &str, container: Option<&str>, uid: &str) -> Option<Named> {
        Some(Named {
            namespace: ns.into(),
            pod: pod.into(),
            container: container.map(Into::into),
            pod_uid: uid.into(),
        })
    }

    #[test]
    fn pods_and_containers_are_named_under_every_driver_and_runtime() {
        let dir = node();
        let names = Names::read(dir.path());
        assert!(names.problems.is_empty(), "{:?}", names.problems);
        let slice = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            UID.replace('-', "_")
        );
        // The pod's own cgroup: no container.
        assert_eq!(names.of(&labels_of(&slice)), named("shop", "web-7d9f", None, UID));
        let app = format!("{slice}/cri-containerd-{}.scope", id('a'));
        assert_eq!(names.of(&labels_of(&app)), named("shop", "web-7d9f", Some("app"), UID));
        let sidecar = format!("{slice}/docker-{}.scope", id('b'));
        assert_eq!(names.of(&labels_of(&sidecar)), named("shop", "web-7d9f", Some("sidecar"), UID));
        // The sandbox (pause) container has no log: the pod's names, no container.
        let sandbox = format!("{slice}/cri-containerd-{}.scope", id('d'));
        assert_eq!(names.of(&labels_of(&sandbox)), named("shop", "web-7d9f", None, UID));
        // cgroupfs driver, cri-o, a static pod.
        let etcd = format!("/kubepods/burstable/pod{STATIC}/crio-{}", id('c'));
        assert_eq!(
            names.of(&labels_of(&etcd)),
            named("kube-system", "etcd-node1", Some("etcd"), STATIC)
        );
        let bare = format!("/kubepods/burstable/pod{STATIC}/{}", id('c'));
        assert_eq!(
            names.of(&labels_of(&bare)),
            named("kube-system", "etcd-node1", Some("etcd"), STATIC)
        );
        // Not a pod's cgroup, or a pod this node's directories do not know.
        assert_eq!(names.of(&labels_of("/system.slice/ssh.service")), None);
        let other = "/kubepods/pod87654321-4321-4321-4321-cba987654321";
        assert_eq!(names.of(&labels_of(other)), None);
    }

    #[test]
    fn a_pod_that_goes_away_loses_its_names_at_the_next_read() {
        let dir = node();
        let app = format!("/kubepods/burstable/pod{UID}/{}", id('a'));
        assert!(Names::read(dir.path()).of(&labels_of(&app)).is_some());
        std::fs::remove_dir_all(dir.path().join(format!("pods/shop_web-7d9f_{UID}"))).unwrap();
        // The container link left behind (the kubelet removes it later) still names the
        // container; its pod's directory is gone, so the uid comes from the path.
        let names = Names::read(dir.path());
        assert_eq!(names.of(&labels_of(&app)), named("shop", "web-7d9f", Some("app"), UID));
        for e in std::fs::read_dir(dir.path().join("containers")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        assert_eq!(Names::read(dir.path()).of(&labels_of(&app)), None);
    }

    #[test]
    fn names_kubernetes_would_not_make_are_skipped_and_links_never_followed() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let secret = d.join("secret");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::create_dir_all(d.join("pods")).unwrap();
        std::fs::create_dir_all(d.join("containers")).unwrap();
        let uid2 = "22345678-1234-1234-1234-123456789abc";
        let uid3 = "32345678-1234-1234-1234-123456789abc";
        for bad in [
            format!("sh\"op_web_{UID}"),
            format!("shop_we\nb_{UID}"),
            format!("shop_.._{UID}"),
            format!("shop_a..b_{uid2}"),
            format!("Shop_web_{uid2}"),
            format!("shop_web_x_{uid2}"),
            format!("shop_web_{}", "g".repeat(32)),
        ] {
            std::fs::create_dir(d.join("pods").join(bad)).unwrap();
        }
        std::fs::create_dir(d.join("pods").join(std::ffi::OsStr::from_bytes(b"shop_w\xffb_x")))
            .unwrap();
        // A link where a pod directory should be: a link is not a directory.
        symlink(&secret, d.join(format!("pods/shop_linked_{uid3}"))).unwrap();
        // Container links: quotes, a line end, `..`, a name with an underscore too many.
        for bad in [
            format!("we\"b_shop_app-{}.log", id('a')),
            format!("web_shop_a\npp-{}.log", id('a')),
            format!("web_.._app-{}.log", id('a')),
            format!("web_shop_app_x-{}.log", id('a')),
            format!("web_shop_app-{}.log", "a".repeat(63)),
        ] {
            symlink(&secret, d.join("containers").join(bad)).unwrap();
        }
        let names = Names::read(d);
        assert!(names.problems.is_empty(), "{:?}", names.problems);
        assert!(names.pods.is_empty(), "{:?}", names.pods);
        assert!(names.containers.is_empty(), "{:?}", names.containers);
        // A link whose target names another pod than its own name: not believed.
        let liar = format!("web_shop_app-{}.log", id('e'));
        symlink(
            format!("/var/log/pods/bank_vault_{UID}/app/0.log"),
            d.join("containers").join(&liar),
        )
        .unwrap();
        let path = format!("/kubepods/pod{UID}/{}", id('e'));
        assert_eq!(Names::read(d).of(&labels_of(&path)), None);
        // `pods` and `containers` themselves links: not followed, and said.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join(format!("pods/shop_web_{UID}"))).unwrap();
        let planted = tempfile::tempdir().unwrap();
        symlink(elsewhere.path().join("pods"), planted.path().join("pods")).unwrap();
        std::fs::write(planted.path().join("containers"), "").unwrap();
        let names = Names::read(planted.path());
        assert!(names.pods.is_empty());
        assert_eq!(names.problems.len(), 2, "{:?}", names.problems);
        assert!(names.problems[0].contains("/pods is a link, which is not followed"));
        assert!(names.problems[1].contains("/containers is not a directory"));
    }

    #[test]
    fn a_missing_directory_is_said_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let names = Names::read(&dir.path().join("nowhere"));
        assert_eq!(names.problems.len(), 2);
        let p = &names.problems[0];
        assert!(p.starts_with("Kubernetes names: cannot read "), "{p}");
        assert!(p.contains("nowhere/pods: No such file or directory"), "{p}");
        assert!(p.contains("--kubelet-log-dir"), "{p}");
        assert!(p.contains("kube_pod_info"), "{p}");
    }

    #[test]
    fn disagreeing_directories_name_nothing_rather_than_something_wrong() {
        let dir = node();
        let d = dir.path();
        // A second directory for the same uid under other names.
        std::fs::create_dir(d.join(format!("pods/bank_vault_{UID}"))).unwrap();
        let names = Names::read(d);
        let slice = format!("/kubepods/pod{UID}");
        // The uid's names are ambiguous; the container link still names the container.
        assert_eq!(names.of(&labels_of(&slice)), None);
        let app = format!("{slice}/{}", id('a'));
        assert_eq!(names.of(&labels_of(&app)), named("shop", "web-7d9f", Some("app"), UID));
        // A container id under another pod's cgroup than its link says: only the pod named.
        let dir = node();
        let names = Names::read(dir.path());
        let wrong = format!("/kubepods/burstable/pod{STATIC}/{}", id('a'));
        assert_eq!(names.of(&labels_of(&wrong)), named("kube-system", "etcd-node1", None, STATIC));
        // The same when the link's target has no uid to compare (not the kubelet's shape):
        // the names disagree with the pod's own directory.
        let cid = id('f');
        symlink(
            format!("/var/lib/docker/containers/{cid}/{cid}-json.log"),
            dir.path().join(format!("containers/web-7d9f_shop_app-{cid}.log")),
        )
        .unwrap();
        let names = Names::read(dir.path());
        let wrong = format!("/kubepods/burstable/pod{STATIC}/{cid}");
        assert_eq!(names.of(&labels_of(&wrong)), named("kube-system", "etcd-node1", None, STATIC));
        let right = format!("/kubepods/burstable/pod{UID}/{cid}");
        assert_eq!(names.of(&labels_of(&right)), named("shop", "web-7d9f", Some("app"), UID));
        // Two links for one container id under different names: no container named.
        symlink("x", dir.path().join(format!("containers/web-7d9f_shop_other-{cid}.log"))).unwrap();
        let names = Names::read(dir.path());
        assert_eq!(names.of(&labels_of(&right)), named("shop", "web-7d9f", None, UID));
    }
}
