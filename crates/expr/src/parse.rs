//! Text to [`Expr`]: the pest grammar, perf's identifier normalisation and number conversion.

use pest::Parser as _;
use pest::iterators::Pair;

use crate::ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident, Span};
use crate::error::{ParseError, ParseErrorKind};

#[derive(pest_derive::Parser)]
#[grammar = "metric.pest"]
struct Grammar;

/// A binary operator's precedence (higher binds tighter) and node, as util/expr.y orders
/// them; every one is left associative, and unary minus binds tighter than all.
fn infix(rule: Rule) -> Option<(u8, BinOp)> {
    Some(match rule {
        Rule::or => (1, BinOp::Or),
        Rule::xor => (2, BinOp::Xor),
        Rule::and => (3, BinOp::And),
        Rule::lt => (4, BinOp::Lt),
        Rule::gt => (4, BinOp::Gt),
        Rule::add => (5, BinOp::Add),
        Rule::sub => (5, BinOp::Sub),
        Rule::mul => (6, BinOp::Mul),
        Rule::div => (6, BinOp::Div),
        Rule::modulo => (6, BinOp::Mod),
        _ => return None,
    })
}

/// How deeply brackets, function calls, `if`s and unary minuses may nest. The grammar and
/// the Pratt parser recurse once (or a few times) per level, so this bounds their stack use;
/// perf's own vendor expressions nest at most 8 deep.
pub const MAX_NESTING: usize = 100;

/// How deep the tree may be: a chain of N binary operators (`a + b + ... `) is N deep. Every
/// pass over the tree (evaluation, the needed-events pass, printing, dropping) recurses once
/// per level, so this bounds their stack use.
pub const MAX_DEPTH: usize = 1000;

/// Parses a `MetricExpr` or `MetricThreshold` as perf 6.12 would, except that characters
/// which start no token are errors (perf's lexer skips them silently) and nesting is bounded
/// ([`MAX_NESTING`], [`MAX_DEPTH`]).
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    check_nesting(text)?;
    let mut pairs =
        Grammar::parse(Rule::root, text).map_err(|err| ParseError::from_pest(text, err))?;
    let root = pairs.next().expect("root rule always yields one pair");
    let if_expr = root.into_inner().next().expect("root holds an if_expr");
    lower_if(if_expr, text).map(|(expr, _)| expr)
}

/// A lexical pass that finds nesting beyond [`MAX_NESTING`] before the recursive grammar
/// sees it. It counts open brackets, the `if`s open at each bracket level (the else branch
/// nests) and runs of `-`; it over-counts slightly (a binary minus followed by a unary one
/// counts two), which only matters near the limit.
fn check_nesting(text: &str) -> Result<(), ParseError> {
    let bytes = text.as_bytes();
    // Per open bracket: how many `if`s are open inside it.
    let mut ifs_per_level: Vec<usize> = vec![0];
    let mut open = 0usize;
    let mut minus_run = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        i += 1;
        match b {
            b'(' => {
                ifs_per_level.push(0);
                open += 1;
                minus_run = 0;
            }
            b')' => {
                if ifs_per_level.len() > 1 {
                    open -= 1 + ifs_per_level.pop().unwrap_or(0);
                }
                minus_run = 0;
            }
            b'-' => minus_run += 1,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'\\' => {
                i += 1;
                minus_run = 0;
            }
            _ if b.is_ascii_alphanumeric() || b"_.:@?#".contains(&b) => {
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b"_.:@?".contains(&bytes[i]))
                {
                    i += 1;
                }
                if &bytes[start..i] == b"if" {
                    *ifs_per_level.last_mut().expect("never empty") += 1;
                    open += 1;
                }
                minus_run = 0;
            }
            _ => minus_run = 0,
        }
        if open + minus_run > MAX_NESTING {
            let end = floor_boundary(text, i);
            return Err(ParseError::new(
                text,
                Span::new(start, end.max(start + 1).min(text.len())),
                ParseErrorKind::TooDeep { limit: MAX_NESTING },
            ));
        }
    }
    Ok(())
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// A lowered node and the depth of its tree.
type Lowered = (Expr, usize);

/// Builds a node over children of depth `below`, refusing trees deeper than [`MAX_DEPTH`].
fn node(text: &str, kind: ExprKind, span: Span, below: usize) -> Result<Lowered, ParseError> {
    if below + 1 > MAX_DEPTH {
        return Err(ParseError::new(text, span, ParseErrorKind::TooLong { limit: MAX_DEPTH }));
    }
    Ok((Expr { kind, span }, below + 1))
}

fn span_of(pair: &Pair<'_, Rule>) -> Span {
    Span::new(pair.as_span().start(), pair.as_span().end())
}

fn lower_if(pair: Pair<'_, Rule>, text: &str) -> Result<Lowered, ParseError> {
    let span = span_of(&pair);
    let mut inner = pair.into_inner();
    let then = lower_expr(inner.next().expect("if_expr starts with expr"), text)?;
    let Some(_kw_if) = inner.next() else { return Ok(then) };
    let cond = lower_expr(inner.next().expect("if has a condition"), text)?;
    let _kw_else = inner.next();
    let otherwise = lower_if(inner.next().expect("if has an else branch"), text)?;
    let below = then.1.max(cond.1).max(otherwise.1);
    node(
        text,
        ExprKind::If {
            then: Box::new(then.0),
            cond: Box::new(cond.0),
            otherwise: Box::new(otherwise.0),
        },
        span,
        below,
    )
}

/// An `expr`'s operands and operators, by precedence climbing: a table lookup per operator,
/// where pest's Pratt parser built its operator map on every call and hashed every operator
/// (a tenth of the parse's instructions).
fn lower_expr(pair: Pair<'_, Rule>, text: &str) -> Result<Lowered, ParseError> {
    let mut items = pair.into_inner().peekable();
    climb(&mut items, 0, text)
}

type Items<'i> = std::iter::Peekable<pest::iterators::Pairs<'i, Rule>>;

/// Operands joined by operators of precedence `min` or more, left to right.
fn climb(items: &mut Items<'_>, min: u8, text: &str) -> Result<Lowered, ParseError> {
    let mut lhs = lower_operand(items, text)?;
    while let Some((prec, op)) = items.peek().and_then(|p| infix(p.as_rule())) {
        if prec < min {
            break;
        }
        items.next();
        let rhs = climb(items, prec + 1, text)?;
        let ((lhs_expr, left), (rhs_expr, right)) = (lhs, rhs);
        let span = Span::new(lhs_expr.span.start as usize, rhs_expr.span.end as usize);
        let kind = ExprKind::Bin(op, Box::new(lhs_expr), Box::new(rhs_expr));
        lhs = node(text, kind, span, left.max(right))?;
    }
    Ok(lhs)
}

/// `neg* primary`: the minuses apply innermost last, each spanning from itself to the end.
fn lower_operand(items: &mut Items<'_>, text: &str) -> Result<Lowered, ParseError> {
    let mut negs: Vec<usize> = Vec::new();
    let primary = loop {
        let pair = items.next().expect("an operand ends with a primary");
        if pair.as_rule() == Rule::neg {
            negs.push(pair.as_span().start());
        } else {
            break pair;
        }
    };
    let (mut operand, mut depth) = lower_primary(primary, text)?;
    for &start in negs.iter().rev() {
        let span = Span::new(start, operand.span.end as usize);
        (operand, depth) = node(text, ExprKind::Neg(Box::new(operand)), span, depth)?;
    }
    Ok((operand, depth))
}

fn lower_primary(pair: Pair<'_, Rule>, text: &str) -> Result<Lowered, ParseError> {
    let span = span_of(&pair);
    let (kind, below) = match pair.as_rule() {
        Rule::number => (
            ExprKind::Num(parse_number(pair.as_str()).ok_or_else(|| {
                ParseError::new(
                    text,
                    span,
                    ParseErrorKind::NumberOutOfRange(pair.as_str().to_string()),
                )
            })?),
            0,
        ),
        Rule::nan => (ExprKind::Num(f64::NAN), 0),
        Rule::literal => (ExprKind::Literal(pair.as_str()[1..].to_string()), 0),
        Rule::ident => (ExprKind::Id(ident(&pair)), 0),
        Rule::paren => {
            let inner = pair.into_inner().next().expect("paren holds an if_expr");
            let (mut expr, depth) = lower_if(inner, text)?;
            // Keep the parentheses in the span so carets point at what the user wrote.
            expr.span = span;
            return Ok((expr, depth));
        }
        Rule::call => {
            let mut inner =
                pair.into_inner().filter(|p| !matches!(p.as_rule(), Rule::comma | Rule::rparen));
            let head = inner.next().expect("call starts with a function name");
            let func_rule = head.into_inner().next().expect("function name").as_rule();
            match func_rule {
                Rule::kw_source_count
                | Rule::kw_aggr_nr
                | Rule::kw_has_event
                | Rule::kw_strcmp_cpuid_str => {
                    let func = match func_rule {
                        Rule::kw_source_count => IdFunc::SourceCount,
                        Rule::kw_aggr_nr => IdFunc::AggrNr,
                        Rule::kw_has_event => IdFunc::HasEvent,
                        _ => IdFunc::StrcmpCpuidStr,
                    };
                    (ExprKind::IdCall(func, ident(&inner.next().expect("id argument"))), 0)
                }
                _ => {
                    let func = match func_rule {
                        Rule::kw_d_ratio => Func::DRatio,
                        Rule::kw_min => Func::Min,
                        _ => Func::Max,
                    };
                    let lhs = lower_expr(inner.next().expect("first argument"), text)?;
                    let rhs = lower_expr(inner.next().expect("second argument"), text)?;
                    let below = lhs.1.max(rhs.1);
                    (ExprKind::Call(func, Box::new(lhs.0), Box::new(rhs.0)), below)
                }
            }
        }
        rule => unreachable!("not a primary rule: {rule:?}"),
    };
    if below == 0 { Ok((Expr { kind, span }, 1)) } else { node(text, kind, span, below) }
}

fn ident(pair: &Pair<'_, Rule>) -> Ident {
    Ident { name: normalize(pair.as_str()), span: span_of(pair) }
}

/// perf's `normalize()`: a backslash is dropped and the next character kept as is.
pub fn normalize(raw: &str) -> String {
    // Most names hold no backslash: one copy, not a push per character.
    if !raw.contains('\\') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `strtod` on a token the grammar accepted as a number. `None` where strtod would set
/// `errno` (overflow to infinity, or underflow of a non-zero mantissa), which perf treats
/// as a lexing error.
fn parse_number(text: &str) -> Option<f64> {
    let value: f64 = text.parse().ok()?;
    if value.is_infinite() {
        return None;
    }
    let mantissa_nonzero =
        text.split('e').next().is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
    if mantissa_nonzero && (value == 0.0 || value.is_subnormal()) {
        return None;
    }
    Some(value)
}
