//! Text to [`Expr`]: the pest grammar, perf's identifier normalisation and number conversion.

use pest::Parser as _;
use pest::iterators::Pair;
use pest::pratt_parser::{Assoc, Op, PrattParser};

use crate::ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident, Span};
use crate::error::{ParseError, ParseErrorKind};

#[derive(pest_derive::Parser)]
#[grammar = "metric.pest"]
struct Grammar;

fn pratt() -> PrattParser<Rule> {
    // All binary operators are left associative; unary minus binds tightest (util/expr.y).
    PrattParser::new()
        .op(Op::infix(Rule::or, Assoc::Left))
        .op(Op::infix(Rule::xor, Assoc::Left))
        .op(Op::infix(Rule::and, Assoc::Left))
        .op(Op::infix(Rule::lt, Assoc::Left) | Op::infix(Rule::gt, Assoc::Left))
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left)
            | Op::infix(Rule::div, Assoc::Left)
            | Op::infix(Rule::modulo, Assoc::Left))
        .op(Op::prefix(Rule::neg))
}

/// Parses a `MetricExpr` or `MetricThreshold` as perf 6.12 would.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    let mut pairs =
        Grammar::parse(Rule::root, text).map_err(|err| ParseError::from_pest(text, err))?;
    let root = pairs.next().expect("root rule always yields one pair");
    let if_expr = root.into_inner().next().expect("root holds an if_expr");
    let pratt = pratt();
    lower_if(if_expr, text, &pratt)
}

fn span_of(pair: &Pair<'_, Rule>) -> Span {
    Span::new(pair.as_span().start(), pair.as_span().end())
}

fn lower_if(
    pair: Pair<'_, Rule>,
    text: &str,
    pratt: &PrattParser<Rule>,
) -> Result<Expr, ParseError> {
    let span = span_of(&pair);
    let mut inner = pair.into_inner();
    let then = lower_expr(inner.next().expect("if_expr starts with expr"), text, pratt)?;
    let Some(_kw_if) = inner.next() else { return Ok(then) };
    let cond = lower_expr(inner.next().expect("if has a condition"), text, pratt)?;
    let _kw_else = inner.next();
    let otherwise = lower_if(inner.next().expect("if has an else branch"), text, pratt)?;
    Ok(Expr {
        kind: ExprKind::If {
            then: Box::new(then),
            cond: Box::new(cond),
            otherwise: Box::new(otherwise),
        },
        span,
    })
}

fn lower_expr(
    pair: Pair<'_, Rule>,
    text: &str,
    pratt: &PrattParser<Rule>,
) -> Result<Expr, ParseError> {
    pratt
        .map_primary(|primary| lower_primary(primary, text, pratt))
        .map_prefix(|op, operand| {
            let operand = operand?;
            let span = Span::new(op.as_span().start(), operand.span.end as usize);
            Ok(Expr { kind: ExprKind::Neg(Box::new(operand)), span })
        })
        .map_infix(|lhs, op, rhs| {
            let (lhs, rhs) = (lhs?, rhs?);
            let op = match op.as_rule() {
                Rule::or => BinOp::Or,
                Rule::xor => BinOp::Xor,
                Rule::and => BinOp::And,
                Rule::lt => BinOp::Lt,
                Rule::gt => BinOp::Gt,
                Rule::add => BinOp::Add,
                Rule::sub => BinOp::Sub,
                Rule::mul => BinOp::Mul,
                Rule::div => BinOp::Div,
                Rule::modulo => BinOp::Mod,
                rule => unreachable!("not an infix rule: {rule:?}"),
            };
            let span = Span::new(lhs.span.start as usize, rhs.span.end as usize);
            Ok(Expr { kind: ExprKind::Bin(op, Box::new(lhs), Box::new(rhs)), span })
        })
        .parse(pair.into_inner())
}

fn lower_primary(
    pair: Pair<'_, Rule>,
    text: &str,
    pratt: &PrattParser<Rule>,
) -> Result<Expr, ParseError> {
    let span = span_of(&pair);
    let kind = match pair.as_rule() {
        Rule::number => ExprKind::Num(parse_number(pair.as_str()).ok_or_else(|| {
            ParseError::new(text, span, ParseErrorKind::NumberOutOfRange(pair.as_str().to_string()))
        })?),
        Rule::nan => ExprKind::Num(f64::NAN),
        Rule::literal => ExprKind::Literal(pair.as_str()[1..].to_string()),
        Rule::ident => ExprKind::Id(ident(&pair)),
        Rule::paren => {
            let inner = pair.into_inner().next().expect("paren holds an if_expr");
            let mut expr = lower_if(inner, text, pratt)?;
            // Keep the parentheses in the span so carets point at what the user wrote.
            expr.span = span;
            return Ok(expr);
        }
        Rule::call => {
            let mut inner =
                pair.into_inner().filter(|p| !matches!(p.as_rule(), Rule::comma | Rule::rparen));
            let head = inner.next().expect("call starts with a function name");
            let func_rule = head.into_inner().next().expect("function name").as_rule();
            match func_rule {
                Rule::kw_source_count | Rule::kw_has_event | Rule::kw_strcmp_cpuid_str => {
                    let func = match func_rule {
                        Rule::kw_source_count => IdFunc::SourceCount,
                        Rule::kw_has_event => IdFunc::HasEvent,
                        _ => IdFunc::StrcmpCpuidStr,
                    };
                    ExprKind::IdCall(func, ident(&inner.next().expect("id argument")))
                }
                _ => {
                    let func = match func_rule {
                        Rule::kw_d_ratio => Func::DRatio,
                        Rule::kw_min => Func::Min,
                        _ => Func::Max,
                    };
                    let lhs = lower_expr(inner.next().expect("first argument"), text, pratt)?;
                    let rhs = lower_expr(inner.next().expect("second argument"), text, pratt)?;
                    ExprKind::Call(func, Box::new(lhs), Box::new(rhs))
                }
            }
        }
        rule => unreachable!("not a primary rule: {rule:?}"),
    };
    Ok(Expr { kind, span })
}

fn ident(pair: &Pair<'_, Rule>) -> Ident {
    Ident { name: normalize(pair.as_str()), span: span_of(pair) }
}

/// perf's `normalize()`: a backslash is dropped and the next character kept as is.
pub fn normalize(raw: &str) -> String {
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
