//! The command line's name filter (`list`, `describe`): a substring or a glob over names.

/// The command line's name filter: a case-insensitive substring, or a glob over the whole
/// name when it contains `*` or `?`.
#[derive(Debug, Clone)]
pub struct NameFilter {
    pattern: Vec<char>,
    glob: bool,
}

impl NameFilter {
    /// The filter for `pattern`.
    pub fn new(pattern: &str) -> NameFilter {
        NameFilter {
            pattern: pattern.to_lowercase().chars().collect(),
            glob: pattern.contains(['*', '?']),
        }
    }

    /// Whether `name` passes.
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.to_lowercase().chars().collect();
        if self.glob {
            glob_match(&self.pattern, &name)
        } else {
            self.pattern.is_empty()
                || name.windows(self.pattern.len()).any(|w| w == self.pattern.as_slice())
        }
    }
}

/// `*` matches any run of characters, `?` one character; everything else itself.
fn glob_match(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently swallows up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}
