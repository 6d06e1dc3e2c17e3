//! The simulator's own reading of perf's metric expressions (`MetricExpr`), so that the
//! ground truth is derived from the vendor formulas without going through tmetric's compiled
//! catalogue functions or its interpreter: a second, independent implementation of perf 6.12's
//! `util/expr.y` grammar and arithmetic.
//!
//! Precedence, lowest first (expr.y's `%left` lines): `A if C else B`, `|`, `^`, `&`,
//! `<` `>`, `+` `-`, `*` `/` `%`, unary `-`. Arithmetic: `x / 0` is NaN, `d_ratio(x, 0)` is
//! 0, `|`/`&`/`^` are logical on non-zero (NaN is true), `%` is C's `long` remainder,
//! comparisons give 1 or 0 (NaN when an operand is NaN, which `if` takes as true).

use std::fmt;

/// A parsed expression. Identifiers are kept as text until [`Expr::link`] names them.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number (or `NaN`).
    Num(f64),
    /// An identifier as written, escapes removed.
    Ident(String),
    /// A `#literal`, without `#`.
    Literal(String),
    /// A linked identifier: index into the caller's value table.
    Value(usize),
    /// Unary minus.
    Neg(Box<Expr>),
    /// A binary operator.
    Bin(Op, Box<Expr>, Box<Expr>),
    /// `then if cond else otherwise`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `min`, `max`, `d_ratio`.
    Call(Func, Box<Expr>, Box<Expr>),
    /// `has_event`, `strcmp_cpuid_str`, `source_count`, `aggr_nr` of an identifier.
    Probe(ProbeFn, String),
    /// A linked probe: index into the caller's value table.
    ProbeValue(usize),
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `&`
    And,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
}

/// Two-argument functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
    /// `d_ratio(a, b)`
    DRatio,
}

/// Functions of an identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFn {
    /// `has_event(x)`
    HasEvent,
    /// `strcmp_cpuid_str(x)`
    StrcmpCpuid,
    /// `source_count(x)`
    SourceCount,
    /// `aggr_nr(x)` (perf 7.x)
    AggrNr,
}

/// A parse error with its byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset in the expression.
    pub at: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.at, self.message)
    }
}

impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Literal(String),
    Sym(char),
    If,
    Else,
    Func(Func),
    Probe(ProbeFn),
}

fn is_sym(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '?')
}

/// Whether an `@` closes the span before anything but a name's characters.
fn closes_at(rest: &[char]) -> bool {
    let mut escaped = false;
    for &c in rest {
        match c {
            '@' if !escaped => return true,
            '\\' if !escaped => escaped = true,
            _ if escaped || is_sym(c) || c == '=' => escaped = false,
            _ => return false,
        }
    }
    false
}

/// Splits `text` into tokens, as expr.l does (longest match; a number that a symbol
/// character continues is a symbol: `1e9` is a number, `0x1` is not).
fn lex(text: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let bytes: Vec<char> = text.chars().collect();
    let mut offsets = Vec::with_capacity(bytes.len() + 1);
    let mut o = 0;
    for c in &bytes {
        offsets.push(o);
        o += c.len_utf8();
    }
    offsets.push(o);
    let mut out = Vec::new();
    let mut i = 0;
    let err = |i: usize, m: &str| ParseError { at: offsets[i], message: m.to_string() };
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c == '#' {
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || "_.-".contains(bytes[i]))
            {
                i += 1;
            }
            if i == start + 1 {
                return Err(err(start, "`#` without a literal name"));
            }
            out.push((offsets[start], Tok::Literal(bytes[start + 1..i].iter().collect())));
            continue;
        }
        // A number: digits, optional fraction, optional exponent; it must not run into a
        // symbol character (then the whole run is an identifier).
        if c.is_ascii_digit() || (c == '.' && bytes.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let mut j = i;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            if j < bytes.len() && bytes[j] == '.' {
                j += 1;
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
            }
            let mut neg_exp = false;
            if j < bytes.len() && bytes[j] == 'e' {
                let mut k = j + 1;
                if k < bytes.len() && bytes[k] == '-' {
                    neg_exp = true;
                    k += 1;
                }
                if k < bytes.len() && bytes[k].is_ascii_digit() {
                    while k < bytes.len() && bytes[k].is_ascii_digit() {
                        k += 1;
                    }
                    j = k;
                }
            }
            let continues = j < bytes.len() && (is_sym(bytes[j]) || bytes[j] == '\\');
            if neg_exp || !continues {
                let s: String = bytes[i..j].iter().collect();
                let v = s.parse::<f64>().map_err(|_| err(i, "bad number"))?;
                out.push((offsets[start], Tok::Num(v)));
                i = j;
                continue;
            }
        }
        if is_sym(c) || c == '\\' {
            let mut s = String::new();
            // Inside `pmu@event\,terms@` jevents.py reads up to the closing `@`, so perf 7.x's
            // vendor files leave `=` unescaped there (`msr@tsc\,cpu=cpu_core@`).
            let mut in_at = false;
            while i < bytes.len() {
                if bytes[i] == '@' {
                    in_at = !in_at;
                }
                if bytes[i] == '=' && in_at && closes_at(&bytes[i..]) {
                    s.push('=');
                    i += 1;
                } else if bytes[i] == '\\' {
                    match bytes.get(i + 1) {
                        Some(&n @ ('-' | ',' | '=')) => {
                            s.push(n);
                            i += 2;
                        }
                        _ => return Err(err(i, "`\\` escapes only `-`, `,` and `=`")),
                    }
                } else if is_sym(bytes[i]) {
                    s.push(bytes[i]);
                    i += 1;
                } else {
                    break;
                }
            }
            let tok = match s.as_str() {
                "if" => Tok::If,
                "else" => Tok::Else,
                "min" => Tok::Func(Func::Min),
                "max" => Tok::Func(Func::Max),
                "d_ratio" => Tok::Func(Func::DRatio),
                "has_event" => Tok::Probe(ProbeFn::HasEvent),
                "strcmp_cpuid_str" => Tok::Probe(ProbeFn::StrcmpCpuid),
                "source_count" => Tok::Probe(ProbeFn::SourceCount),
                "aggr_nr" => Tok::Probe(ProbeFn::AggrNr),
                "NaN" => Tok::Num(f64::NAN),
                _ => Tok::Ident(s),
            };
            out.push((offsets[start], tok));
            continue;
        }
        if "|^&<>+-*/%(),".contains(c) {
            out.push((offsets[start], Tok::Sym(c)));
            i += 1;
            continue;
        }
        return Err(err(i, &format!("`{c}` starts no token")));
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    end: usize,
    depth: usize,
}

/// Nesting limit: vendor expressions nest a few dozen deep at most.
const MAX_DEPTH: usize = 200;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(o, _)| *o)
    }

    fn fail<T>(&self, message: &str) -> Result<T, ParseError> {
        Err(ParseError { at: self.at(), message: message.to_string() })
    }

    fn expect(&mut self, c: char) -> Result<(), ParseError> {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.pos += 1;
            Ok(())
        } else {
            self.fail(&format!("expected `{c}`"))
        }
    }

    /// `A if C else B`: A and C are plain expressions; the else branch nests.
    fn if_expr(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail("nested too deep");
        }
        let then = self.binary(0)?;
        let out = if self.peek() == Some(&Tok::If) {
            self.pos += 1;
            let cond = self.binary(0)?;
            if self.peek() != Some(&Tok::Else) {
                return self.fail("expected `else`");
            }
            self.pos += 1;
            let otherwise = self.if_expr()?;
            Expr::If(Box::new(then), Box::new(cond), Box::new(otherwise))
        } else {
            then
        };
        self.depth -= 1;
        Ok(out)
    }

    fn level(c: char) -> Option<(usize, Op)> {
        Some(match c {
            '|' => (0, Op::Or),
            '^' => (1, Op::Xor),
            '&' => (2, Op::And),
            '<' => (3, Op::Lt),
            '>' => (3, Op::Gt),
            '+' => (4, Op::Add),
            '-' => (4, Op::Sub),
            '*' => (5, Op::Mul),
            '/' => (5, Op::Div),
            '%' => (5, Op::Rem),
            _ => return None,
        })
    }

    /// Left-associative binary operators at `min` precedence or above.
    fn binary(&mut self, min: usize) -> Result<Expr, ParseError> {
        let mut lhs = self.unary()?;
        while let Some(Tok::Sym(c)) = self.peek() {
            let Some((prec, op)) = Parser::level(*c) else { break };
            if prec < min {
                break;
            }
            self.pos += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.peek() == Some(&Tok::Sym('-')) {
            self.pos += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return self.fail("nested too deep");
            }
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Neg(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let Some(tok) = self.peek().cloned() else { return self.fail("expected an operand") };
        self.pos += 1;
        match tok {
            Tok::Num(v) => Ok(Expr::Num(v)),
            Tok::Ident(s) => Ok(Expr::Ident(s)),
            Tok::Literal(s) => Ok(Expr::Literal(s)),
            Tok::Sym('(') => {
                let e = self.if_expr()?;
                self.expect(')')?;
                Ok(e)
            }
            Tok::Func(f) => {
                self.expect('(')?;
                let a = self.if_expr()?;
                self.expect(',')?;
                let b = self.if_expr()?;
                self.expect(')')?;
                Ok(Expr::Call(f, Box::new(a), Box::new(b)))
            }
            Tok::Probe(p) => {
                self.expect('(')?;
                let Some(Tok::Ident(s)) = self.peek().cloned() else {
                    return self.fail("expected an event name");
                };
                self.pos += 1;
                self.expect(')')?;
                Ok(Expr::Probe(p, s))
            }
            _ => {
                self.pos -= 1;
                self.fail("expected an operand")
            }
        }
    }
}

/// Parses a `MetricExpr`.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    let toks = lex(text)?;
    let mut p = Parser { toks, pos: 0, end: text.len(), depth: 0 };
    let e = p.if_expr()?;
    if p.pos != p.toks.len() {
        return p.fail("unexpected token");
    }
    Ok(e)
}

fn truthy(x: f64) -> bool {
    x != 0.0
}

fn c_long(x: f64) -> i64 {
    if x.is_nan() { 0 } else { x as i64 }
}

impl Expr {
    /// Replaces identifiers, literals and probes through `name`, which gives a value-table
    /// index for an identifier (`false`) or a probe/literal (`true`) key, or `None` to keep it.
    pub fn link(&mut self, name: &mut impl FnMut(&Expr) -> Option<usize>) {
        match self {
            Expr::Ident(_) | Expr::Literal(_) => {
                if let Some(i) = name(self) {
                    *self = Expr::Value(i);
                }
            }
            Expr::Probe(..) => {
                if let Some(i) = name(self) {
                    *self = Expr::ProbeValue(i);
                }
            }
            Expr::Neg(a) => a.link(name),
            Expr::Bin(_, a, b) | Expr::Call(_, a, b) => {
                a.link(name);
                b.link(name);
            }
            Expr::If(a, b, c) => {
                a.link(name);
                b.link(name);
                c.link(name);
            }
            Expr::Num(_) | Expr::Value(_) | Expr::ProbeValue(_) => {}
        }
    }

    /// Every identifier, literal and probe still unlinked, in order of appearance.
    pub fn names(&self, out: &mut Vec<Expr>) {
        match self {
            Expr::Ident(_) | Expr::Literal(_) | Expr::Probe(..) => out.push(self.clone()),
            Expr::Neg(a) => a.names(out),
            Expr::Bin(_, a, b) | Expr::Call(_, a, b) => {
                a.names(out);
                b.names(out);
            }
            Expr::If(a, b, c) => {
                a.names(out);
                b.names(out);
                c.names(out);
            }
            Expr::Num(_) | Expr::Value(_) | Expr::ProbeValue(_) => {}
        }
    }

    /// Every value-table index the expression reads.
    pub fn values(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Value(i) | Expr::ProbeValue(i) => out.push(*i),
            Expr::Neg(a) => a.values(out),
            Expr::Bin(_, a, b) | Expr::Call(_, a, b) => {
                a.values(out);
                b.values(out);
            }
            Expr::If(a, b, c) => {
                a.values(out);
                b.values(out);
                c.values(out);
            }
            _ => {}
        }
    }

    /// The value-table indices the expression can read, leaving out the branches of an `if`
    /// whose condition `known` decides (a condition over constants only).
    pub fn live_values(&self, known: &dyn Fn(usize) -> Option<f64>, out: &mut Vec<usize>) {
        match self {
            Expr::Value(i) | Expr::ProbeValue(i) => out.push(*i),
            Expr::Neg(a) => a.live_values(known, out),
            Expr::Bin(_, a, b) | Expr::Call(_, a, b) => {
                a.live_values(known, out);
                b.live_values(known, out);
            }
            Expr::If(then, cond, otherwise) => match cond.constant(known) {
                Some(c) if truthy(c) => then.live_values(known, out),
                Some(_) => otherwise.live_values(known, out),
                None => {
                    then.live_values(known, out);
                    cond.live_values(known, out);
                    otherwise.live_values(known, out);
                }
            },
            _ => {}
        }
    }

    /// Whether a literal `NaN` is in a branch `known` values leave live: perf 7.2's
    /// `lpm_cpu_power_cores` is `... if has_event(power@energy\-cores@) else NaN`.
    pub fn live_nan(&self, known: &dyn Fn(usize) -> Option<f64>) -> bool {
        match self {
            Expr::Num(v) => v.is_nan(),
            Expr::Neg(a) => a.live_nan(known),
            Expr::Bin(_, a, b) | Expr::Call(_, a, b) => a.live_nan(known) || b.live_nan(known),
            Expr::If(then, cond, otherwise) => match cond.constant(known) {
                Some(c) if truthy(c) => then.live_nan(known),
                Some(_) => otherwise.live_nan(known),
                None => then.live_nan(known) || otherwise.live_nan(known),
            },
            _ => false,
        }
    }

    /// The value when every index it reads is `known`.
    pub fn constant(&self, known: &dyn Fn(usize) -> Option<f64>) -> Option<f64> {
        let mut used = Vec::new();
        self.values(&mut used);
        if used.iter().any(|&i| known(i).is_none()) {
            return None;
        }
        Some(self.eval(&mut |i| known(i).unwrap_or(f64::NAN)))
    }

    /// Evaluates with `value(i)` for each linked index. An unlinked name is NaN.
    pub fn eval(&self, value: &mut impl FnMut(usize) -> f64) -> f64 {
        match self {
            Expr::Num(v) => *v,
            Expr::Value(i) | Expr::ProbeValue(i) => value(*i),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Probe(..) => f64::NAN,
            Expr::Neg(a) => -a.eval(value),
            Expr::Bin(op, a, b) => {
                let x = a.eval(value);
                let y = b.eval(value);
                match op {
                    Op::Add => x + y,
                    Op::Sub => x - y,
                    Op::Mul => x * y,
                    Op::Div => {
                        if y == 0.0 {
                            f64::NAN
                        } else {
                            x / y
                        }
                    }
                    Op::Rem => {
                        let d = c_long(y);
                        if d == 0 { f64::NAN } else { (c_long(x) % d) as f64 }
                    }
                    // BINARY_OP: a NaN operand makes NaN, which `if` takes as true.
                    Op::Lt | Op::Gt if x.is_nan() || y.is_nan() => f64::NAN,
                    Op::Lt => f64::from(u8::from(x < y)),
                    Op::Gt => f64::from(u8::from(x > y)),
                    Op::Or => f64::from(u8::from(truthy(x) || truthy(y))),
                    Op::And => f64::from(u8::from(truthy(x) && truthy(y))),
                    Op::Xor => f64::from(u8::from(truthy(x) != truthy(y))),
                }
            }
            Expr::If(then, cond, otherwise) => {
                if truthy(cond.eval(value)) {
                    then.eval(value)
                } else {
                    otherwise.eval(value)
                }
            }
            Expr::Call(f, a, b) => {
                let x = a.eval(value);
                let y = b.eval(value);
                match f {
                    Func::Min => {
                        if x < y {
                            x
                        } else {
                            y
                        }
                    }
                    Func::Max => {
                        if x > y {
                            x
                        } else {
                            y
                        }
                    }
                    Func::DRatio => {
                        if y == 0.0 {
                            0.0
                        } else {
                            x / y
                        }
                    }
                }
            }
        }
    }
}
