//! perf's glob match (`strglobmatch`, `fnmatch` without flags): `*`, `?`, `[...]` classes
//! with ranges and `!`/`^` complement, and `\` making the next character plain. Used for PMU
//! names written with a wildcard and for tracepoint globs (`syscalls:sys_enter_open*`).

/// Whether `text` matches `pattern` as a whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

/// Whether perf reads `text` as a glob (`strpbrk(text, "*?")`): a `[` alone does not make
/// one, and is then matched as written.
pub fn is_glob(text: &str) -> bool {
    text.contains(['*', '?'])
}

fn go(p: &[char], t: &[char]) -> bool {
    match p.first() {
        None => t.is_empty(),
        Some('*') => {
            let rest = &p[1..];
            (0..=t.len()).any(|i| go(rest, &t[i..]))
        }
        Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
        Some('\\') if p.len() > 1 => t.first() == Some(&p[1]) && go(&p[2..], &t[1..]),
        Some('[') => {
            // The class's first character (after a `!` or `^`) is a member even if it is `]`.
            let first = if matches!(p.get(1), Some('!' | '^')) { 2 } else { 1 };
            let close = p.iter().skip(first + 1).position(|&c| c == ']').map(|i| i + first + 1);
            let Some(close) = close else {
                return t.first() == Some(&'[') && go(&p[1..], &t[1..]);
            };
            let Some(&c) = t.first() else { return false };
            let class = &p[1..close];
            let (negate, class) = match class.first() {
                Some('!') | Some('^') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == '-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != negate && go(&p[close + 1..], &t[1..])
        }
        Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_perfs_strglobmatch() {
        assert!(matches("sys_enter_open*", "sys_enter_openat2"));
        assert!(matches("sys_enter_open*", "sys_enter_open"));
        assert!(!matches("sys_enter_open*", "sys_exit_open"));
        assert!(matches("*", "sched_switch"));
        assert!(matches("sched_wak?ng", "sched_waking"));
        assert!(matches("sys_[ex]*_read", "sys_enter_read"));
        assert!(matches("sys_[!x]*_read", "sys_enter_read"));
        assert!(!matches("sys_[!e]*_read", "sys_enter_read"));
        assert!(matches("cpu[0-9]", "cpu7"));
        assert!(matches("a\\*b", "a*b"));
        assert!(!matches("a\\*b", "axb"));
        // `[]x]`: a `]` first in a class is a member, as fnmatch reads it.
        assert!(matches("[]x]", "]") && matches("[!]]", "x") && !matches("[!]]", "]"));
        assert!(is_glob("block:*") && is_glob("sched_wak?ng") && !is_glob("cpu[0-9]"));
    }
}
