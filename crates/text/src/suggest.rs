//! "Did you mean" suggestions: the names closest to what a user typed, and lists of them in
//! prose, so every command words a near miss the same way.

/// `a`, `b` or `c`.
pub fn join_code(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Up to `limit` of `names` closest to `wanted`: those containing it (or contained in it),
/// then those within a small edit distance, best first.
pub fn closest(wanted: &str, names: impl IntoIterator<Item = String>, limit: usize) -> Vec<String> {
    let wanted_lower = wanted.to_ascii_lowercase();
    let budget = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = names
        .into_iter()
        .filter_map(|name| {
            let lower = name.to_ascii_lowercase();
            let score = if lower == wanted_lower {
                0
            } else if lower.contains(&wanted_lower)
                || (lower.len() >= 3 && wanted_lower.contains(&lower))
            {
                1 + lower.len().abs_diff(wanted_lower.len()) / 8
            } else {
                let distance = levenshtein(&lower, &wanted_lower);
                if distance > budget {
                    return None;
                }
                2 + distance
            };
            Some((score, name))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1.eq_ignore_ascii_case(&b.1));
    scored.into_iter().take(limit).map(|(_, name)| name).collect()
}

/// The edit distance of `a` and `b` in characters.
pub fn levenshtein(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_best_first_and_lists_in_prose() {
        let names = ["tma_retiring", "tma_frontend_bound", "tma_backend_bound", "IPC"];
        let names = || names.iter().map(|n| n.to_string());
        assert_eq!(closest("tma_retring", names(), 5), ["tma_retiring"]);
        assert_eq!(closest("bound", names(), 5), ["tma_backend_bound", "tma_frontend_bound"]);
        assert!(closest("zzzzzz", names(), 5).is_empty());
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(join_code(&["a".into()]), "`a`");
        assert_eq!(join_code(&["a".into(), "b".into(), "c".into()]), "`a`, `b` or `c`");
    }
}
