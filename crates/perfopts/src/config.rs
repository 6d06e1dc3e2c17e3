//! perf's config files as `perf stat` reads them (tools/perf/util/config.c): `$PERF_CONFIG`
//! alone when it is set (`/dev/null` reads nothing), else `/etc/perfconfig` (unless
//! `PERF_CONFIG_NOSYSTEM`) and then `~/.perfconfig` (unless `PERF_CONFIG_NOGLOBAL`; only when
//! this user or root owns it), in perf's git-like syntax; the `[stat]` keys perf 6.12 reads
//! (`big-num`, `no-csv-summary`, `bpf-counter-events`). As perf, a line that does not parse
//! stops the reading of its file (the keys before it stay) with a warning naming the file
//! and line, and a bad value is ignored with a warning; unlike perf, the warning says what
//! was expected. Files are read up to [`MAX_BYTES`]. Warnings go to the caller's `warn`
//! (the CLI's standard error, which `-q` and the CSV and JSON layouts govern).

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of a config file read: perf's are a few lines; a longer one (or `/dev/zero`) is
/// not a config file.
pub const MAX_BYTES: u64 = 1 << 20;

/// perf's system-wide config file for a perf installed under `/usr`.
const SYSTEM: &str = "/etc/perfconfig";

/// The `[stat]` settings found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerfConfig {
    /// `stat.big-num`.
    pub big_num: Option<bool>,
    /// `stat.no-csv-summary`.
    pub no_csv_summary: Option<bool>,
}

/// Reads the config files perf would read in this environment, warning about what is wrong
/// through `warn`.
pub fn load(warn: fn(&str)) -> PerfConfig {
    let env = |name: &str| std::env::var_os(name);
    let mut config = PerfConfig::default();
    if let Some(only) = env("PERF_CONFIG") {
        let _ = read_into(Path::new(&only), &mut config, warn);
        return config;
    }
    let off =
        |name: &str| env(name).is_some_and(|v| parse_bool(&v.to_string_lossy()) == Some(true));
    if !off("PERF_CONFIG_NOSYSTEM")
        && Path::new(SYSTEM).exists()
        && read_into(Path::new(SYSTEM), &mut config, warn).is_err()
    {
        // perf stops at a bad system file and reads no user file after it.
        return config;
    }
    if !off("PERF_CONFIG_NOGLOBAL")
        && let Some(home) = env("HOME").filter(|h| !h.is_empty())
    {
        let path = PathBuf::from(home).join(".perfconfig");
        if let Ok(meta) = std::fs::metadata(&path) {
            use std::os::unix::fs::MetadataExt;
            if meta.uid() != 0 && meta.uid() != tmetric_runtime::sys::euid() {
                warn(&format!(
                    "File {} not owned by current user or root, ignoring it.",
                    path.display()
                ));
            } else if meta.len() > 0 {
                let _ = read_into(&path, &mut config, warn);
            }
        }
    }
    config
}

/// Reads one file's `[stat]` keys into `config`; `Err` after a line that does not parse
/// (warned about). A file that does not exist is silently nothing, as in perf.
fn read_into(path: &Path, config: &mut PerfConfig, warn: fn(&str)) -> Result<(), ()> {
    let text = match read_capped(path) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(()),
        Err(why) => {
            warn(&format!("config file {}: {why}; it is ignored", path.display()));
            return Err(());
        }
    };
    let (items, bad) = parse(&text);
    for item in &items {
        apply(item, path, config, warn);
    }
    match bad {
        Some((line, why)) => {
            warn(&format!(
                "bad config file line {line} in {}: {why}; the lines after it are ignored, as perf does",
                path.display()
            ));
            Err(())
        }
        None => Ok(()),
    }
}

/// The file's text, at most [`MAX_BYTES`]; `None` when it does not exist. A FIFO or socket
/// is refused (reading one could wait for ever); a device is read like a file (`/dev/null`
/// is perf's way to read no config).
fn read_capped(path: &Path) -> Result<Option<String>, String> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err("it is a directory, not a file".into());
    }
    if kind.is_fifo() || kind.is_socket() {
        return Err("it is a FIFO or socket, not a file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("it is longer than {MAX_BYTES} bytes, too long for a config file"));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// One `name = value` of a file: the full key (`stat.big-num`), the value (`None` for a
/// bare name, which perf reads as true) and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// `section.name`, the section lower-cased as perf does.
    pub key: String,
    /// The value with quotes and escapes resolved.
    pub value: Option<String>,
    /// The line it starts on (from 1).
    pub line: usize,
}

/// Parses a config file as perf's `perf_parse_file`: the items before the first line that
/// does not parse, and that line with what was expected there.
pub fn parse(text: &str) -> (Vec<Item>, Option<(usize, String)>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut items = Vec::new();
    let mut section = String::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let body = raw.trim_start();
        if body.is_empty() || body.starts_with(['#', ';']) {
            continue;
        }
        if let Some(rest) = body.strip_prefix('[') {
            match parse_section(rest) {
                Ok((name, after)) => {
                    section = name;
                    // perf reads on after `]` on the same line as a new line would start.
                    let after = after.trim_start();
                    if after.is_empty() || after.starts_with(['#', ';']) {
                        continue;
                    }
                    match parse_item(after, &section, line) {
                        Ok(item) => items.push(item),
                        Err(why) => return (items, Some((line, why))),
                    }
                }
                Err(why) => return (items, Some((line, why))),
            }
            continue;
        }
        match parse_item(body, &section, line) {
            Ok(item) => items.push(item),
            Err(why) => return (items, Some((line, why))),
        }
    }
    (items, None)
}

/// `name]` or `name "ext"]` after `[`: the section's name and what follows `]`.
fn parse_section(rest: &str) -> Result<(String, &str), String> {
    let Some(end) = rest.find(']') else {
        return Err("a section line ends with `]`, as in `[stat]`".into());
    };
    let inside = &rest[..end];
    let (base, ext) = match inside.split_once(char::is_whitespace) {
        Some((base, ext)) => (base, Some(ext.trim())),
        None => (inside, None),
    };
    if base.is_empty()
        || !base.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "`[{inside}]` is not a section name (letters, digits, `-`, `_` and `.`, as `[stat]`)"
        ));
    }
    let mut name = base.to_ascii_lowercase();
    if let Some(ext) = ext {
        let quoted = ext.strip_prefix('"').and_then(|e| e.strip_suffix('"'));
        let Some(quoted) = quoted else {
            return Err(format!("`[{inside}]`: a subsection is quoted, as `[base \"name\"]`"));
        };
        name.push('.');
        name.push_str(quoted);
    }
    Ok((name, &rest[end + 1..]))
}

/// `name`, `name = value` or `name = "value" # comment`, under `section`.
fn parse_item(body: &str, section: &str, line: usize) -> Result<Item, String> {
    let first = body.chars().next().unwrap_or(' ');
    if !first.is_ascii_alphabetic() {
        return Err(format!(
            "`{}` does not start with a letter; expected `name = value` (or a `[section]` line, or a comment after `#`)",
            tmetric_text::quote(body)
        ));
    }
    let end = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    let (name, rest) = body.split_at(end.unwrap_or(body.len()));
    // perf lower-cases the name's first letter only.
    let name = first.to_ascii_lowercase().to_string() + &name[1..];
    let rest = rest.trim_start_matches([' ', '\t']);
    let value = if rest.is_empty() || rest.trim_end() == "" {
        None
    } else if let Some(value) = rest.strip_prefix('=') {
        Some(parse_value(value)?)
    } else {
        return Err(format!(
            "expected `=` after `{name}`, as in `{name} = value` (names hold letters, digits, `-` and `_`)"
        ));
    };
    let key = if section.is_empty() { name } else { format!("{section}.{name}") };
    Ok(Item { key, value, line })
}

/// A value as perf's `parse_value`: spaces collapsed, quotes removed, `\t`, `\n`, `\b`,
/// `\\`, `\"` resolved, `#` or `;` outside quotes starting a comment.
fn parse_value(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let (mut quote, mut space) = (false, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c.is_whitespace() && !quote {
            space = true;
            continue;
        }
        if !quote && (c == ';' || c == '#') {
            break;
        }
        if space {
            if !out.is_empty() {
                out.push(' ');
            }
            space = false;
        }
        match c {
            '\\' => match chars.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('b') => out.push('\u{8}'),
                Some(c @ ('\\' | '"')) => out.push(c),
                other => {
                    return Err(format!(
                        "unknown escape `\\{}` in a value (perf knows \\t, \\n, \\b, \\\\ and \\\")",
                        other.map(String::from).unwrap_or_default()
                    ));
                }
            },
            '"' => quote = !quote,
            c => out.push(c),
        }
    }
    if quote {
        return Err("a quote `\"` in the value is not closed on its line".into());
    }
    Ok(out)
}

/// perf's `perf_config_bool`: none (a bare name) is true, empty is false, `true`/`yes`/`on`
/// and `false`/`no`/`off` in any case, or an integer (0 is false); `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    let v = value.trim();
    if v.is_empty() {
        return Some(false);
    }
    for (words, b) in [(["true", "yes", "on"], true), (["false", "no", "off"], false)] {
        if words.iter().any(|w| v.eq_ignore_ascii_case(w)) {
            return Some(b);
        }
    }
    let (digits, radix) = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (v, 10),
    };
    let digits = digits.strip_suffix(['k', 'K', 'm', 'M', 'g', 'G']).unwrap_or(digits);
    i64::from_str_radix(digits, radix).ok().map(|n| n != 0)
}

/// Applies one item perf's `perf_stat_config` reads; other keys are perf's other commands'.
fn apply(item: &Item, path: &Path, config: &mut PerfConfig, warn: fn(&str)) {
    let target = match item.key.as_str() {
        "stat.big-num" => &mut config.big_num,
        "stat.no-csv-summary" => &mut config.no_csv_summary,
        "stat.bpf-counter-events" => {
            warn(&format!(
                "stat.bpf-counter-events in {} (line {}): tmetric counts those events with counters of its own; it shares none through BPF as perf does",
                path.display(),
                item.line
            ));
            return;
        }
        _ => return,
    };
    match item.value.as_deref().map_or(Some(true), parse_bool) {
        Some(b) => *target = Some(b),
        None => warn(&format!(
            "bad config value for '{}' in {} (line {}): expected true or false (yes/no, on/off, a number), ignoring it",
            item.key,
            path.display(),
            item.line
        )),
    }
}

#[cfg(test)]
mod tests {
    //! perf's config file syntax and booleans, checked against what perf's `util/config.c`
    //! accepts and refuses.

    use super::{parse, parse_bool};
    #[test]
    fn perfs_syntax_reads_sections_values_quotes_and_comments() {
        let text = "# perf config\n[stat]\n\tbig-num = false ; why\n  No-csv-summary\n[core \"x\"]\nproc-map-timeout = \"5 00\"\n";
        let (items, bad) = parse(text);
        assert_eq!(bad, None);
        let keys: Vec<(&str, Option<&str>, usize)> =
            items.iter().map(|i| (i.key.as_str(), i.value.as_deref(), i.line)).collect();
        assert_eq!(
            keys,
            [
                ("stat.big-num", Some("false"), 3),
                ("stat.no-csv-summary", None, 4),
                ("core.x.proc-map-timeout", Some("5 00"), 6)
            ]
        );
    }

    #[test]
    fn a_line_that_does_not_parse_stops_the_file_where_it_is() {
        let (items, bad) = parse("[stat]\nbig-num = no\nbig-num false\nno-csv-summary\n");
        assert_eq!(items.len(), 1);
        let (line, why) = bad.expect("line 3 is bad");
        assert_eq!(line, 3);
        assert!(why.contains("expected `=` after `big-num`"), "{why}");
        let (_, bad) = parse("[stat\n");
        assert_eq!(bad.map(|b| b.0), Some(1));
        let (_, bad) = parse("[stat]\nx = \"open\n");
        assert_eq!(bad.map(|b| b.0), Some(2));
        let (_, bad) = parse("[stat]\n=1\n");
        assert_eq!(bad.map(|b| b.0), Some(2));
    }

    #[test]
    fn booleans_are_perfs() {
        assert_eq!(parse_bool("Yes"), Some(true));
        assert_eq!(parse_bool("off"), Some(false));
        assert_eq!(parse_bool(""), Some(false));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("2k"), Some(true));
        assert_eq!(parse_bool("0x0"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }
}
