//! Event and group modifiers (`:u`, `:k`, `:G`, `:p`, `:D`, ...) applied to an event's
//! attributes as perf 6.12 does, and the warnings for modifiers that mean nothing when
//! counting.

use crate::event::grammar::Modifiers;
use crate::sys::Attr;

/// perf's `parse_events__modifier_list`: `u`, `k`, `h` keep only those modes (as event
/// modifiers from nothing excluded; as group modifiers on top of the member's own), `G` and
/// `H` guest or host only, `p` the precise level, `I` not when idle, `D`/`e` pinned and
/// exclusive on a group leader.
pub(super) fn apply_modifiers(
    attr: &mut Attr,
    gh: &mut bool,
    m: &Modifiers,
    group: bool,
    leader: bool,
) {
    if m.is_empty() {
        return;
    }
    let (mut eu, mut ek, mut eh) = if group {
        (attr.exclude_user, attr.exclude_kernel, attr.exclude_hv)
    } else {
        (false, false, false)
    };
    let (mut e_host, mut e_guest) =
        if group { (attr.exclude_host, attr.exclude_guest) } else { (false, false) };
    let mut exclude = eu || ek || eh;
    let mut exclude_gh = group && *gh;
    if m.precise > 0 {
        e_guest = true;
    }
    // The first of `u`, `k`, `h` excludes every mode; each then lets its own mode back in.
    if m.user {
        if !exclude {
            exclude = true;
            (ek, eh) = (true, true);
        }
        if !exclude_gh {
            e_guest = true;
        }
        eu = false;
    }
    if m.kernel {
        if !exclude {
            exclude = true;
            (eu, eh) = (true, true);
        }
        ek = false;
    }
    if m.hypervisor {
        if !exclude {
            (eu, ek) = (true, true);
        }
        eh = false;
    }
    if m.guest {
        if !exclude_gh {
            exclude_gh = true;
            e_host = true;
        }
        e_guest = false;
    }
    if m.host {
        if !exclude_gh {
            exclude_gh = true;
            e_guest = true;
        }
        e_host = false;
    }
    attr.exclude_user = eu;
    attr.exclude_kernel = ek;
    attr.exclude_hv = eh;
    attr.exclude_host = e_host;
    attr.exclude_guest = e_guest;
    *gh = exclude_gh;
    if m.precise > 0 {
        attr.precise_ip = (attr.precise_ip + m.precise).min(3);
    }
    if m.non_idle {
        attr.exclude_idle = true;
    }
    if m.pinned && leader {
        attr.pinned = true;
    }
    if m.exclusive && leader {
        attr.exclusive = true;
    }
}

/// Modifiers that are accepted but change nothing when counting.
pub(super) fn mod_warnings(m: &Modifiers, warnings: &mut Vec<String>) {
    if m.bpf {
        warnings.push(
            "the `b` modifier (count with BPF) is ignored: tmetric counts with perf_event_open"
                .into(),
        );
    }
    if m.sample_read {
        warnings.push(
            "the `S` modifier (read the group on samples) only matters when sampling; ignored"
                .into(),
        );
    }
    if m.precise_max {
        warnings.push("the `P` modifier (maximum precision) only matters when sampling; the event is counted as written without it".into());
    }
}
