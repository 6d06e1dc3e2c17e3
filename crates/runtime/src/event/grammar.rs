//! The syntax of perf 6.12's event lists (`-e`), with byte spans: groups (`{a,b}`, named
//! `name{a,b}`, group modifiers `{a,b}:u`), events (bare names, `head/terms/`, `rNNN`,
//! `type:config`, `system:tracepoint`) and modifiers. What the names mean is decided later
//! ([`super::resolve`]); this module only says where each piece is, or where the text stops
//! being an event list and what was expected there.
//!
//! The rules follow `tools/perf/util/parse-events.l` and `parse-events.y`: an event extends to
//! the next `,`, `{` or `}` outside a `pmu/.../` pair of slashes; its whole text (modifiers
//! included) is its default name; a `:` suffix made of modifier letters is modifiers, any other
//! `a:b` is a tracepoint.

use std::ops::Range;

/// A byte range of the list text.
pub type Span = Range<usize>;

/// A syntax error: where, and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The bad spot.
    pub span: Span,
    /// What is wrong and what was expected.
    pub message: String,
}

fn error<T>(span: Span, message: impl Into<String>) -> Result<T, SyntaxError> {
    Err(SyntaxError { span, message: message.into() })
}

/// A parsed list: events and groups in the order written.
#[derive(Debug, Clone, PartialEq)]
pub struct ListAst {
    /// The items.
    pub items: Vec<Item>,
}

/// One top-level item.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An event outside braces.
    Event(EventAst),
    /// `{...}`.
    Group(GroupAst),
}

/// `[name]{event,...}[:modifiers]`.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupAst {
    /// The name before `{`, if any (perf keeps it for `--group` output only).
    pub name: Option<String>,
    /// The members, in order.
    pub events: Vec<EventAst>,
    /// Modifiers after `}:`, applied to every member.
    pub modifiers: Modifiers,
    /// From the name (or `{`) to the end of the modifiers.
    pub span: Span,
}

/// One event as written.
#[derive(Debug, Clone, PartialEq)]
pub struct EventAst {
    /// The text, modifiers included: the name printed unless a `name=` term says otherwise.
    pub text: String,
    /// Where `text` is.
    pub span: Span,
    /// What it names.
    pub body: Body,
    /// Its own modifiers.
    pub modifiers: Modifiers,
}

/// The part of an event before its modifiers.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A bare name: a legacy hardware, software or cache event, a tool event, a raw `rNNN`, or
    /// an event to look for on the PMUs (sysfs alias or vendor event).
    Name {
        /// The name.
        name: String,
        /// Where it is.
        span: Span,
    },
    /// `head/terms/`: `head` is a PMU (exact or a wildcard such as `uncore_imc`), or a legacy,
    /// raw or PMU event name with extra terms (`cycles/name=c/`).
    Slashed {
        /// The text before the first `/`.
        head: String,
        /// Where it is.
        head_span: Span,
        /// The terms between the slashes.
        terms: Vec<TermAst>,
    },
    /// `type:config`, numbers as perf reads them (decimal or `0x` hex).
    Numeric {
        /// `perf_event_attr.type`.
        type_: u32,
        /// `perf_event_attr.config`.
        config: u64,
    },
    /// `system:name`.
    Tracepoint {
        /// The tracefs system.
        system: String,
        /// The tracepoint.
        name: String,
        /// Where `name` is.
        name_span: Span,
    },
}

/// One `term[=value]` between slashes.
#[derive(Debug, Clone, PartialEq)]
pub struct TermAst {
    /// The term name (`event`, `umask`, `config1`, `name`, `cycles`, `r1a8`, an alias, ...).
    pub name: String,
    /// The value; `None` for a bare term.
    pub value: Option<TermValue>,
    /// Where the term is.
    pub span: Span,
}

/// A term's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TermValue {
    /// A number (decimal or `0x` hex).
    Num(u64),
    /// Anything else (quotes removed from `'...'`).
    Str(String),
}

/// Event modifiers (`parse-events.l` `modifiers()`), as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Modifiers {
    /// `u`: user mode.
    pub user: bool,
    /// `k`: kernel mode.
    pub kernel: bool,
    /// `h`: hypervisor.
    pub hypervisor: bool,
    /// `G`: guest only.
    pub guest: bool,
    /// `H`: host only.
    pub host: bool,
    /// `I`: exclude idle.
    pub non_idle: bool,
    /// `p`, `pp`, `ppp`: precise level.
    pub precise: u8,
    /// `P`: the highest precise level the PMU has.
    pub precise_max: bool,
    /// `S`: read the group on samples.
    pub sample_read: bool,
    /// `D`: pinned.
    pub pinned: bool,
    /// `W`: weak group.
    pub weak: bool,
    /// `e`: exclusive.
    pub exclusive: bool,
    /// `b`: count with BPF.
    pub bpf: bool,
    /// `R`: retire latency.
    pub retire_latency: bool,
    /// Where the modifier letters are (`None` when there are none).
    pub span: Option<Span>,
}

impl Modifiers {
    /// Whether any modifier was written.
    pub fn is_empty(&self) -> bool {
        self.span.is_none()
    }
}

/// The modifier letters and what each means, for messages.
pub const MODIFIER_HELP: &str = "u (user), k (kernel), h (hypervisor), G (guest), H (host), \
    I (non-idle), p/pp/ppp (precise), P (max precise), S (sample read), D (pinned), \
    W (weak group), e (exclusive), b (BPF), R (retire latency)";

pub use tmetric_names::is_modifier_text;

/// Parses modifier letters at byte offset `at` of the list.
pub fn parse_modifiers(text: &str, at: usize) -> Result<Modifiers, SyntaxError> {
    let mut m = Modifiers::default();
    if text.is_empty() {
        return Ok(m);
    }
    m.span = Some(at..at + text.len());
    for (i, c) in text.char_indices() {
        let here = at + i..at + i + c.len_utf8();
        let (flag, what) = match c {
            'u' => (&mut m.user, "user"),
            'k' => (&mut m.kernel, "kernel"),
            'h' => (&mut m.hypervisor, "hypervisor"),
            'G' => (&mut m.guest, "guest"),
            'H' => (&mut m.host, "host"),
            'I' => (&mut m.non_idle, "non-idle"),
            'P' => (&mut m.precise_max, "max precise"),
            'S' => (&mut m.sample_read, "sample read"),
            'D' => (&mut m.pinned, "pinned"),
            'W' => (&mut m.weak, "weak group"),
            'e' => (&mut m.exclusive, "exclusive"),
            'b' => (&mut m.bpf, "BPF"),
            'R' => (&mut m.retire_latency, "retire latency"),
            'p' => {
                if m.precise == 3 {
                    return error(here, "at most three `p`: precise levels are 1 to 3");
                }
                m.precise += 1;
                continue;
            }
            _ => {
                return error(
                    here,
                    format!("unknown modifier `{c}`; expected modifiers: {MODIFIER_HELP}"),
                );
            }
        };
        if std::mem::replace(flag, true) {
            return error(here, format!("duplicate modifier `{c}` ({what}): give it once"));
        }
    }
    Ok(m)
}

/// Parses a number as perf's lexer does: decimal, or `0x` followed by hex digits.
pub fn parse_num(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
            u64::from_str_radix(hex, 16).ok()
        }
        Some(_) => None,
        None if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) => text.parse().ok(),
        None => None,
    }
}

fn looks_numeric(text: &str) -> bool {
    text.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// Parses the terms of `pmu/terms/` (the text between the slashes), at byte offset `at`.
pub fn parse_terms(text: &str, at: usize) -> Result<Vec<TermAst>, SyntaxError> {
    let mut terms = Vec::new();
    if text.trim().is_empty() {
        return Ok(terms);
    }
    // Split at commas outside single quotes (`name='a,b'`).
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in text.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            ',' if !quoted => {
                pieces.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    if quoted {
        let open = text.rfind('\'').unwrap_or(0);
        return error(at + open..at + open + 1, "a quoted term value is missing its closing `'`");
    }
    pieces.push((start, text.len()));
    for (from, to) in pieces {
        let raw = &text[from..to];
        let lead = raw.len() - raw.trim_start().len();
        let piece = raw.trim();
        let span = at + from + lead..at + from + lead + piece.len();
        if piece.is_empty() {
            let here = at + from..at + from + raw.len().max(1);
            return error(here, "empty term; expected `term=value` or a term name between commas");
        }
        let (name, value) = match piece.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (piece, None),
        };
        if name.is_empty() {
            return error(span.start..span.start + 1, "expected a term name before `=`");
        }
        if let Some(bad) = name.find(|c: char| c.is_whitespace() || c == '\'' || c == '=') {
            let pos = span.start + bad;
            return error(pos..pos + 1, format!("unexpected character in term name `{name}`"));
        }
        let value = match value {
            None => None,
            Some("") => {
                let end = span.end;
                return error(end - 1..end, format!("expected a value after `{name}=`"));
            }
            Some(v) if v.starts_with('\'') => {
                if v.len() < 2 || !v.ends_with('\'') {
                    return error(span.clone(), "a quoted term value must end with `'`");
                }
                Some(TermValue::Str(v[1..v.len() - 1].to_string()))
            }
            Some(v) if looks_numeric(v) => match parse_num(v) {
                Some(n) => Some(TermValue::Num(n)),
                None => {
                    let vpos = span.end - v.len();
                    return error(
                        vpos..span.end,
                        format!(
                            "`{v}` is not a number; expected decimal or 0x hex that fits 64 bits"
                        ),
                    );
                }
            },
            Some(v) => Some(TermValue::Str(v.to_string())),
        };
        terms.push(TermAst { name: name.to_string(), value, span });
    }
    Ok(terms)
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s[self.pos..].chars().next()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek()
            && c.is_whitespace()
        {
            self.pos += c.len_utf8();
        }
    }

    fn here(&self) -> Span {
        let len = self.peek().map_or(0, char::len_utf8);
        self.pos..self.pos + len
    }

    fn item(&mut self) -> Result<Item, SyntaxError> {
        // `[name]{`: a group, when `{` comes before any `,`, `}` or `/`.
        let rest = &self.s[self.pos..];
        if let Some(i) = rest.find([',', '{', '}', '/'])
            && rest[i..].starts_with('{')
        {
            let name = rest[..i].trim();
            let start = self.pos;
            self.pos += i + 1;
            return self.group(start, (!name.is_empty()).then(|| name.to_string()));
        }
        self.event(false).map(Item::Event)
    }

    fn group(&mut self, start: usize, name: Option<String>) -> Result<Item, SyntaxError> {
        let open = self.pos - 1;
        let mut events = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some('}') if events.is_empty() => {
                    return error(open..self.pos + 1, "empty group `{}`; expected events inside");
                }
                Some('{') => {
                    return error(
                        self.here(),
                        "groups cannot nest; close the group with `}` first",
                    );
                }
                None => {
                    return error(open..open + 1, "this `{` is never closed; expected `}`");
                }
                _ => {}
            }
            events.push(self.event(true)?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {
                    self.pos += 1;
                    break;
                }
                None => return error(open..open + 1, "this `{` is never closed; expected `}`"),
                Some('{') => {
                    return error(
                        self.here(),
                        "groups cannot nest; close the group with `}` first",
                    );
                }
                Some(c) => {
                    return error(
                        self.here(),
                        format!("unexpected `{c}`; expected `,` or `}}` after a group member"),
                    );
                }
            }
        }
        let mut modifiers = Modifiers::default();
        let after = &self.s[self.pos..];
        let len = after.find([',', '{', '}']).unwrap_or(after.len());
        let suffix = &after[..len];
        if let Some(mods) = suffix.strip_prefix(':') {
            let mods_trim = mods.trim_end();
            if mods_trim.is_empty() {
                return error(
                    self.pos..self.pos + 1,
                    format!("expected modifiers after `}}:`: {MODIFIER_HELP}"),
                );
            }
            modifiers = parse_modifiers(mods_trim, self.pos + 1)?;
            self.pos += len;
        } else if !suffix.trim().is_empty() {
            let lead = suffix.len() - suffix.trim_start().len();
            let at = self.pos + lead;
            return error(
                at..at + 1,
                "unexpected text after `}`; group modifiers follow a `:` (`{a,b}:u`), and events are separated by `,`",
            );
        }
        let end = self.pos;
        Ok(Item::Group(GroupAst { name, events, modifiers, span: start..end }))
    }

    /// One event, up to the next `,`, `{` or `}` outside `/.../`.
    fn event(&mut self, in_group: bool) -> Result<EventAst, SyntaxError> {
        self.skip_ws();
        let start = self.pos;
        let s = self.s;
        let stop = |from: usize| s[from..].find([',', '{', '}', '/']).map_or(s.len(), |i| from + i);
        if s[start..].starts_with("mem:") {
            let end = s[start..].find([',', '}']).map_or(s.len(), |i| start + i);
            return error(
                start..end,
                "hardware breakpoint events (`mem:ADDR`) are not supported by tmetric; expected a counting event",
            );
        }
        let mut end = stop(start);
        let mut slashes = None;
        if s[end..].starts_with('/') {
            let open = end;
            let Some(close) = s[open + 1..].find('/').map(|i| open + 1 + i) else {
                return error(
                    open..open + 1,
                    "this `/` opens the terms of `pmu/terms/`, but no `/` closes them",
                );
            };
            end = stop(close + 1);
            if s[end..].starts_with('/') {
                return error(
                    end..end + 1,
                    "unexpected `/` after the terms' closing `/`; expected modifiers, `,` or the end",
                );
            }
            slashes = Some((open, close));
        }
        if s[end..].starts_with('{') {
            let msg = if in_group {
                "groups cannot nest; close the group with `}` first"
            } else {
                "`{` must start a list item (`{a,b}`) or follow a group name"
            };
            return error(end..end + 1, msg);
        }
        let text_end = start + s[start..end].trim_end().len();
        self.pos = end;
        if text_end == start {
            let what = match s[start..].chars().next() {
                Some(c) => format!("unexpected `{c}`; expected an event"),
                None => "expected an event after `,`".to_string(),
            };
            let here = start..start + s[start..].chars().next().map_or(0, char::len_utf8);
            return error(here, what);
        }
        let text = &s[start..text_end];
        let (body, modifiers) = match slashes {
            Some((open, close)) => {
                let head = s[start..open].trim();
                if head.is_empty() {
                    return error(
                        open..open + 1,
                        "expected a PMU or event name before `/` (`cpu/event=0x3c/`)",
                    );
                }
                let terms = parse_terms(&s[open + 1..close], open + 1)?;
                let tail = &s[close + 1..text_end];
                let (mods, at) = match tail.strip_prefix(':') {
                    Some(m) => (m, close + 2),
                    None => (tail, close + 1),
                };
                let modifiers = parse_modifiers(mods, at)?;
                (
                    Body::Slashed {
                        head: head.to_string(),
                        head_span: start..start + head.len(),
                        terms,
                    },
                    modifiers,
                )
            }
            None => plain(text, start)?,
        };
        Ok(EventAst { text: text.to_string(), span: start..text_end, body, modifiers })
    }
}

/// An event without slashes: `name[:mods]`, `type:config[:mods]`, `system:name[:mods]`.
fn plain(text: &str, start: usize) -> Result<(Body, Modifiers), SyntaxError> {
    let mut parts: Vec<(usize, &str)> = Vec::new();
    let mut from = 0;
    for (i, c) in text.char_indices() {
        if c == ':' {
            parts.push((from, &text[from..i]));
            from = i + 1;
        }
    }
    parts.push((from, &text[from..]));
    let at = |off: usize| start + off;
    if let Some(&(off, p)) = parts.iter().find(|(_, p)| p.contains(char::is_whitespace)) {
        let i = off + p.find(char::is_whitespace).unwrap_or(0);
        return error(
            at(i)..at(i) + 1,
            "unexpected space inside an event; separate events with `,`",
        );
    }
    if parts.len() > 3 {
        let (off, _) = parts[3];
        return error(
            at(off - 1)..at(off),
            "too many `:`; expected `name:modifiers` or `system:tracepoint[:modifiers]`",
        );
    }
    let (first_off, first) = parts[0];
    if first.is_empty() {
        return error(at(first_off)..at(first_off) + 1, "expected an event name before `:`");
    }
    let mods_at = |i: usize| -> Result<Modifiers, SyntaxError> {
        let (off, m) = parts[i];
        parse_modifiers(m, at(off))
    };
    if looks_numeric(first) {
        let Some(type_) = parse_num(first).and_then(|t| u32::try_from(t).ok()) else {
            return error(
                at(first_off)..at(first_off) + first.len(),
                "expected a PMU type number (decimal or 0x hex, 32 bits)",
            );
        };
        let Some(&(coff, ctext)) = parts.get(1) else {
            return error(
                at(first_off)..at(first_off) + first.len(),
                "a number alone is not an event; expected `type:config` (`4:0x3c`)",
            );
        };
        let Some(config) = parse_num(ctext) else {
            return error(
                at(coff)..at(coff) + ctext.len().max(1),
                "expected a config number (decimal or 0x hex) after `type:`",
            );
        };
        let modifiers = if parts.len() == 3 { mods_at(2)? } else { Modifiers::default() };
        return Ok((Body::Numeric { type_, config }, modifiers));
    }
    let name_body =
        || Body::Name { name: first.to_string(), span: at(first_off)..at(first_off) + first.len() };
    match parts.len() {
        1 => Ok((name_body(), Modifiers::default())),
        2 => {
            let (off, second) = parts[1];
            // `cycles:` (a bare separator) is accepted as perf does.
            if second.is_empty() || is_modifier_text(second) {
                Ok((name_body(), parse_modifiers(second, at(off))?))
            } else {
                Ok((
                    Body::Tracepoint {
                        system: first.to_string(),
                        name: second.to_string(),
                        name_span: at(off)..at(off) + second.len(),
                    },
                    Modifiers::default(),
                ))
            }
        }
        _ => {
            let (off, second) = parts[1];
            if second.is_empty() {
                return error(at(off)..at(off) + 1, "expected a tracepoint name between the `:`s");
            }
            Ok((
                Body::Tracepoint {
                    system: first.to_string(),
                    name: second.to_string(),
                    name_span: at(off)..at(off) + second.len(),
                },
                mods_at(2)?,
            ))
        }
    }
}

/// Parses an event list.
pub fn parse(list: &str) -> Result<ListAst, SyntaxError> {
    let mut p = Parser { s: list, pos: 0 };
    let mut items = Vec::new();
    loop {
        p.skip_ws();
        if p.peek().is_none() {
            let msg = if items.is_empty() {
                "empty event list; expected events such as `task-clock,page-faults`"
            } else {
                "expected an event after `,`"
            };
            let end = list.len();
            return error(end.saturating_sub(1)..end, msg);
        }
        if p.peek() == Some('}') {
            return error(p.here(), "`}` without a `{` before it");
        }
        items.push(p.item()?);
        p.skip_ws();
        match p.peek() {
            None => break,
            Some(',') => p.pos += 1,
            Some('}') => return error(p.here(), "`}` without a `{` before it"),
            Some(c) => {
                return error(p.here(), format!("unexpected `{c}`; expected `,` between events"));
            }
        }
    }
    Ok(ListAst { items })
}

/// Renders `message` under `text` with a caret line marking `span`, as the one-line error
/// plus the list and the marker.
pub fn caret(text: &str, span: &Span) -> String {
    let start = span.start.min(text.len());
    let end = span.end.clamp(start, text.len());
    let col = text[..start].chars().count();
    let width = text[start..end].chars().count().max(1);
    format!("  {text}\n  {}{}", " ".repeat(col), "^".repeat(width))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(list: &str) -> Vec<EventAst> {
        parse(list)
            .unwrap()
            .items
            .into_iter()
            .flat_map(|i| match i {
                Item::Event(e) => vec![e],
                Item::Group(g) => g.events,
            })
            .collect()
    }

    #[test]
    fn items_split_at_top_level_commas() {
        let list = parse("task-clock,cpu/event=0x3c,umask=1/u,{cs,faults}:W,msr/tsc/").unwrap();
        assert_eq!(list.items.len(), 4);
        let Item::Event(e) = &list.items[1] else { panic!() };
        assert_eq!(e.text, "cpu/event=0x3c,umask=1/u");
        assert!(e.modifiers.user && !e.modifiers.kernel);
        let Body::Slashed { head, terms, .. } = &e.body else { panic!() };
        assert_eq!(head, "cpu");
        assert_eq!(
            terms[0],
            TermAst { name: "event".into(), value: Some(TermValue::Num(0x3c)), span: 15..25 }
        );
        let Item::Group(g) = &list.items[2] else { panic!() };
        assert!(g.modifiers.weak);
        assert_eq!(g.events.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(), ["cs", "faults"]);
    }

    #[test]
    fn forms_and_modifiers() {
        let e = events(
            "cycles:ppu,sched:sched_switch,sched:sched_switch:k,4:0x3c:u,r1a8,L1-dcache-loads:k,cycles:",
        );
        assert_eq!(e[0].modifiers.precise, 2);
        assert!(
            matches!(&e[1].body, Body::Tracepoint { system, name, .. } if system == "sched" && name == "sched_switch")
        );
        assert!(e[2].modifiers.kernel);
        assert_eq!(e[3].body, Body::Numeric { type_: 4, config: 0x3c });
        assert!(matches!(&e[4].body, Body::Name { name, .. } if name == "r1a8"));
        assert!(e[6].modifiers.is_empty());
        let named = parse("foo{cs,faults}:u").unwrap();
        let Item::Group(g) = &named.items[0] else { panic!() };
        assert_eq!(g.name.as_deref(), Some("foo"));
        assert!(g.modifiers.user);
        let quoted = events("cpu/event=1,name='a,b:c'/");
        let Body::Slashed { terms, .. } = &quoted[0].body else { panic!() };
        assert_eq!(terms[1].value, Some(TermValue::Str("a,b:c".into())));
    }

    #[test]
    fn errors_point_at_the_bad_spot() {
        let at = |list: &str| parse(list).unwrap_err();
        let dup = at("cycles:uu");
        assert_eq!(dup.span, 8..9);
        assert!(dup.message.contains("duplicate modifier `u`"), "{}", dup.message);
        assert_eq!(at("cs:pppp").span, 6..7);
        assert_eq!(at("cs,,faults").span, 3..4);
        assert_eq!(at("cs,").message, "expected an event after `,`");
        assert_eq!(at("{a,b").span, 0..1);
        assert_eq!(at("a}").span, 1..2);
        assert_eq!(at("cpu/event=1").span, 3..4);
        assert!(at("{a,{b}}").message.contains("nest"));
        assert!(at("{a}u").message.contains("`:`"));
        assert_eq!(at("cpu/event=,umask=1/").span, 9..10);
        assert_eq!(at("cpu/event=1,,umask=1/").span, 12..13);
        assert_eq!(at("cpu/event=0x1g/").span, 10..14);
        assert!(at("mem:0x1000:rw").message.contains("breakpoint"));
        assert!(at("1").message.contains("type:config"));
        // Not all modifier letters: read as a tracepoint `cycles:ukz`, resolved later.
        assert!(matches!(events("cycles:ukz")[0].body, Body::Tracepoint { .. }));
    }

    #[test]
    fn carets_count_characters() {
        assert_eq!(caret("cs:x", &(3..4)), "  cs:x\n     ^");
    }
}
