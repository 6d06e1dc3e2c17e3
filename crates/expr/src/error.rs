//! Parse errors that show the expression with a caret under the offending span.

use std::fmt;

use crate::ast::Span;
use crate::parse::Rule;
use tmetric_text::quote;

/// Why an expression did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// `a / / b`, `min(a, )`, `a ==b`: the parser wanted one of `expected` here.
    Unexpected {
        /// What would have been accepted, in user words.
        expected: Vec<String>,
        /// What was found instead (`end of expression` at the end).
        found: String,
    },
    /// `1e999`: strtod overflows or underflows.
    NumberOutOfRange(String),
    /// `aé`, a control byte: a character that starts no token.
    UnexpectedChar(char),
    /// `foo(1, 2)`: a name followed by `(` that is no function.
    UnknownFunction(String),
    /// Brackets, calls, `if`s or unary minuses nested deeper than `limit`.
    TooDeep {
        /// [`crate::MAX_NESTING`].
        limit: usize,
    },
    /// A tree deeper than `limit` (a chain of that many operators).
    TooLong {
        /// [`crate::MAX_DEPTH`].
        limit: usize,
    },
}

/// A parse error with enough context to render a caret diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What went wrong.
    pub kind: ParseErrorKind,
    /// Where, in bytes of `text`.
    pub span: Span,
    /// The whole expression.
    pub text: String,
}

impl ParseError {
    pub(crate) fn new(text: &str, span: Span, kind: ParseErrorKind) -> ParseError {
        ParseError { kind, span, text: text.to_string() }
    }

    pub(crate) fn from_pest(text: &str, err: pest::error::Error<Rule>) -> ParseError {
        let pos = match err.location {
            pest::error::InputLocation::Pos(pos) => pos,
            pest::error::InputLocation::Span((start, _)) => start,
        };
        let mut expected: Vec<String> = match &err.variant {
            pest::error::ErrorVariant::ParsingError { positives, .. } => {
                positives.iter().filter_map(|rule| rule_words(*rule)).map(str::to_string).collect()
            }
            pest::error::ErrorVariant::CustomError { message } => vec![message.clone()],
        };
        expected.sort();
        expected.dedup();
        if expected.is_empty() {
            expected.push("an operator or the end of the expression".to_string());
        }
        if let Some(c) = text[pos.min(text.len())..].chars().next()
            && !starts_token(c)
        {
            return ParseError::new(
                text,
                Span::new(pos, pos + c.len_utf8()),
                ParseErrorKind::UnexpectedChar(c),
            );
        }
        if let Some((start, name)) = called_name(text, pos) {
            return ParseError::new(
                text,
                Span::new(start, pos),
                ParseErrorKind::UnknownFunction(name.to_string()),
            );
        }
        let found = found_at(text, pos);
        let end = (pos + found_len(text, pos)).min(text.len());
        ParseError::new(
            text,
            Span::new(pos, end.max(pos)),
            ParseErrorKind::Unexpected { expected, found },
        )
    }

    /// The one-line message, without the caret picture.
    pub fn message(&self) -> String {
        match &self.kind {
            ParseErrorKind::Unexpected { expected, found } => {
                format!("expected {}, found {found}", join_or(expected))
            }
            ParseErrorKind::NumberOutOfRange(text) => {
                format!("number {} is out of the range of a double", quote(text))
            }
            ParseErrorKind::UnexpectedChar(c) => {
                format!(
                    "unexpected character {} (U+{:04X}); expressions use ASCII names, numbers, operators and brackets",
                    quote(&c.to_string()),
                    u32::from(*c)
                )
            }
            ParseErrorKind::UnknownFunction(name) => format!(
                "unknown function {}; the functions are d_ratio, min, max, source_count, aggr_nr, has_event and strcmp_cpuid_str",
                quote(name)
            ),
            ParseErrorKind::TooDeep { limit } => format!(
                "the expression nests brackets, calls, `if`s or minus signs more than {limit} deep"
            ),
            ParseErrorKind::TooLong { limit } => {
                format!("the expression is more than {limit} operators deep; split it up")
            }
        }
    }

    /// The expression on one line and a caret line under the span.
    pub fn caret(&self) -> String {
        caret_lines(&self.text, self.span)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n{}", self.message(), self.caret())
    }
}

impl std::error::Error for ParseError {}

/// Renders `text` with carets under `span`. Multi-line expressions show only the line the
/// span starts on, with its line number; long lines are cut to a window around the span.
pub fn caret_lines(text: &str, span: Span) -> String {
    const WINDOW: usize = 100;
    let start = floor_char(text, (span.start as usize).min(text.len()));
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let end = floor_char(text, (span.end as usize).clamp(start, line_end));
    let line = &text[line_start..line_end];
    // Counted, never collected: the line may be a hundred megabytes.
    let line_chars = line.chars().count();
    let col = text[line_start..start].chars().count();
    let width = text[start..end].chars().count().max(1);
    // Keep the span in view: start the window a little before it.
    let (from, to) = if line_chars <= WINDOW {
        (0, line_chars)
    } else {
        let from = col.saturating_sub(30).min(line_chars.saturating_sub(WINDOW));
        (from, (from + WINDOW).min(line_chars))
    };
    let byte_at = |chars: usize| line.char_indices().nth(chars).map_or(line.len(), |(i, _)| i);
    let mut shown: String = line[byte_at(from)..byte_at(to)]
        .chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect();
    let mut caret_col = col - from;
    if from > 0 {
        shown.insert_str(0, "...");
        caret_col += 3;
    }
    if to < line_chars {
        shown.push_str("...");
    }
    let width = width.min(to.saturating_sub(col).max(1));
    let prefix = if line_start > 0 {
        format!("(line {}) ", text[..line_start].matches('\n').count() + 1)
    } else {
        String::new()
    };
    format!(
        "    {prefix}{shown}\n    {}{}{}",
        " ".repeat(prefix.len()),
        " ".repeat(caret_col),
        "^".repeat(width)
    )
}

fn floor_char(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Whether `c` may start a token or is whitespace the grammar skips.
fn starts_token(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.:@?\\#|^&<>-+*/%(), \t\n\r".contains(c)
}

/// When the parser stopped at a `(` right after a name (`foo(`), that name and where it starts.
fn called_name(text: &str, pos: usize) -> Option<(usize, &str)> {
    if !text[pos.min(text.len())..].starts_with('(') {
        return None;
    }
    let before = text[..pos].trim_end_matches([' ', '\t', '\n', '\r']);
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '?'))
        .last()
        .map(|(i, _)| i)?;
    let name = &before[start..];
    // A number before `(` (`2(`) is a missing operator, not a call.
    (!name.starts_with(|c: char| c.is_ascii_digit() || c == '.')).then_some((start, name))
}

fn found_at(text: &str, pos: usize) -> String {
    match text[pos.min(text.len())..].chars().next() {
        None => "end of expression".to_string(),
        Some(_) => {
            let len = found_len(text, pos);
            quote(&text[pos..pos + len])
        }
    }
}

fn found_len(text: &str, pos: usize) -> usize {
    let rest = &text[pos.min(text.len())..];
    let word: usize = rest
        .char_indices()
        .take_while(|(_, c)| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '?' | '\\')
        })
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    if word > 0 { word } else { rest.chars().next().map_or(0, char::len_utf8) }
}

fn rule_words(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::number | Rule::nan => "a number",
        Rule::literal => "a `#literal`",
        Rule::ident => "an event or metric name",
        Rule::call | Rule::binary_func | Rule::id_func => "a function call",
        Rule::paren => "`(`",
        Rule::rparen => "`)`",
        Rule::comma => "`,`",
        Rule::neg => "`-`",
        Rule::expr | Rule::if_expr => "an expression",
        Rule::or
        | Rule::xor
        | Rule::and
        | Rule::lt
        | Rule::gt
        | Rule::add
        | Rule::sub
        | Rule::mul
        | Rule::div
        | Rule::modulo => "an operator",
        Rule::kw_if => "`if`",
        Rule::kw_else => "`else`",
        Rule::EOI => "end of expression",
        _ => return None,
    })
}
