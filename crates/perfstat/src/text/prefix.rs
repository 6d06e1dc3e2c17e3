//! A row's prefix: the `-I` timestamp and the aggregation id (`CPU12`, `S0-D0-C3`, a
//! `--per-thread` `comm-tid`) with its CPU count.

use super::Tok;
use crate::assemble::Prefix;
use crate::log::Aggr;
use crate::mode::Aggregation;
use crate::number::{looks_numeric, parse_timestamp, parse_uint};

/// Reads `[timestamp] [aggr-id [cpus]]` and returns the index of the first token after it.
pub(crate) fn read_prefix(line: &str, toks: &[Tok]) -> (Prefix, usize) {
    let mut prefix = Prefix::default();
    let mut idx = 0;
    if toks.len() >= 2
        && let Some(t) = parse_timestamp(toks[0].text)
    {
        prefix.interval = Some(t);
        idx = 1;
    }
    let count_like =
        |i: usize| toks.get(i).is_some_and(|t| looks_numeric(t.text) || t.text.starts_with('<'));
    if let Some(tok) = toks.get(idx) {
        if let Some(kind) = aggr_kind(tok.text) {
            let mut aggr = Aggr { kind, id: tok.text.to_string(), cpus: None };
            idx += 1;
            // The per-X modes always print the number of CPUs after the id; a bare integer
            // there is that number even when what follows is not a count (then an error).
            if !matches!(kind, Aggregation::Cpu | Aggregation::Thread)
                && let Some(cpus) = toks.get(idx).and_then(|t| parse_uint(t.text))
                && toks.len() > idx + 1
            {
                aggr.cpus = u32::try_from(cpus).ok();
                idx += 1;
            }
            prefix.aggr = Some(aggr);
        } else if !count_like(idx) && !tok.text.starts_with('#') {
            // `--per-thread`: `comm-tid`, where comm may contain spaces.
            for j in idx + 1..toks.len().min(idx + 6) {
                if count_like(j) {
                    let id = &line[tok.start..toks[j - 1].end()];
                    if is_thread_id(id) {
                        prefix.aggr = Some(Aggr {
                            kind: Aggregation::Thread,
                            id: id.to_string(),
                            cpus: None,
                        });
                        idx = j;
                    }
                    break;
                }
            }
        }
    }
    (prefix, idx)
}

pub(crate) fn is_thread_id(id: &str) -> bool {
    id.rsplit_once('-').is_some_and(|(comm, tid)| !comm.is_empty() && parse_uint(tid).is_some())
        && !looks_numeric(id)
}

/// Recognises the ids of `-A` (`CPU3`), `--per-socket` (`S0`), `--per-die` (`S0-D0`),
/// `--per-core` (`S0-D0-C1`, older perf `S0-C1`), `--per-cluster` (`S0-D0-CLS0`),
/// `--per-cache` (`S0-D0-L3-ID0`) and `--per-node` (`N0`).
pub(crate) fn aggr_kind(text: &str) -> Option<Aggregation> {
    // Most words asked about are counts and event names.
    if !matches!(text.as_bytes().first(), Some(b'C' | b'N' | b'S')) {
        return None;
    }
    let numbered = |s: &str, p: &str| s.strip_prefix(p).is_some_and(|d| parse_uint(d).is_some());
    if numbered(text, "CPU") {
        return Some(Aggregation::Cpu);
    }
    if numbered(text, "N") {
        return Some(Aggregation::Node);
    }
    let parts: Vec<&str> = text.split('-').collect();
    if !numbered(parts[0], "S") {
        return None;
    }
    match parts[1..] {
        [] => Some(Aggregation::Socket),
        [d] if numbered(d, "D") => Some(Aggregation::Die),
        [c] if numbered(c, "C") => Some(Aggregation::Core),
        [d, c] if numbered(d, "D") && numbered(c, "CLS") => Some(Aggregation::Cluster),
        [d, c] if numbered(d, "D") && numbered(c, "C") => Some(Aggregation::Core),
        [d, l, id] if numbered(d, "D") && numbered(l, "L") && numbered(id, "ID") => {
            Some(Aggregation::Cache)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_ids() {
        assert_eq!(aggr_kind("CPU12"), Some(Aggregation::Cpu));
        assert_eq!(aggr_kind("S0"), Some(Aggregation::Socket));
        assert_eq!(aggr_kind("S1-D0"), Some(Aggregation::Die));
        assert_eq!(aggr_kind("S0-D0-C3"), Some(Aggregation::Core));
        assert_eq!(aggr_kind("S0-C3"), Some(Aggregation::Core));
        assert_eq!(aggr_kind("S0-D0-CLS1"), Some(Aggregation::Cluster));
        assert_eq!(aggr_kind("S0-D0-L3-ID0"), Some(Aggregation::Cache));
        assert_eq!(aggr_kind("N1"), Some(Aggregation::Node));
        for not in ["CPU", "S", "Sx", "cycles", "S0-X1", "N", "SLOTS"] {
            assert_eq!(aggr_kind(not), None, "{not}");
        }
    }

    #[test]
    fn thread_ids() {
        assert!(is_thread_id("rust_worker-1"));
        assert!(is_thread_id("Web Content-1234"));
        assert!(!is_thread_id("page-faults"));
        assert!(!is_thread_id("1-2"));
    }
}
