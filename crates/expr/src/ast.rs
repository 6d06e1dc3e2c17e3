//! The expression tree: nodes with byte spans into the source text, and a compact printer.

use std::fmt::{self, Write};

/// A byte range `start..end` of the expression text a node came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }
}

/// Binary operators, in perf's precedence order from lowest to highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `|`: logical or with perf's short-circuit on finite operands.
    Or,
    /// `^`: logical exclusive or.
    Xor,
    /// `&`: logical and with perf's short-circuit on finite operands.
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
    /// `/`: NaN when the divisor is zero.
    Div,
    /// `%`: integer remainder; a zero divisor fails the metric.
    Mod,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::And => "&",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
        }
    }

    /// Binding strength: higher binds tighter.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::Xor => 2,
            BinOp::And => 3,
            BinOp::Lt | BinOp::Gt => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Mod => 6,
        }
    }
}

/// Two-argument functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Func {
    /// `d_ratio(a, b)`: 0 when `b` is 0, else `a / b`.
    DRatio,
    /// `min(a, b)`: C's `a < b ? a : b`.
    Min,
    /// `max(a, b)`: C's `a > b ? a : b`.
    Max,
}

impl Func {
    /// The function's name as written.
    pub fn name(self) -> &'static str {
        match self {
            Func::DRatio => "d_ratio",
            Func::Min => "min",
            Func::Max => "max",
        }
    }
}

/// Functions whose single argument is an identifier, not an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdFunc {
    /// `source_count(ID)`: how many PMU instances were merged into the event.
    SourceCount,
    /// `aggr_nr(ID)` (perf 7.x): how many counters (CPUs and threads of every PMU instance)
    /// were summed into the event's value in this aggregation unit.
    AggrNr,
    /// `has_event(ID)`: 1 if the event exists on this machine.
    HasEvent,
    /// `strcmp_cpuid_str(ID)`: 1 if the CPU's cpuid matches ID.
    StrcmpCpuidStr,
}

impl IdFunc {
    /// The function's name as written.
    pub fn name(self) -> &'static str {
        match self {
            IdFunc::SourceCount => "source_count",
            IdFunc::AggrNr => "aggr_nr",
            IdFunc::HasEvent => "has_event",
            IdFunc::StrcmpCpuidStr => "strcmp_cpuid_str",
        }
    }
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What the node is.
    pub kind: ExprKind,
    /// Where it came from.
    pub span: Span,
}

/// The node kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// A number, or the keyword `NaN`.
    Num(f64),
    /// `#name`, without the `#`.
    Literal(String),
    /// An identifier: an event, a metric reference or a tool event.
    Id(Ident),
    /// Unary minus.
    Neg(Box<Expr>),
    /// A binary operator.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `then if cond else otherwise`.
    If {
        /// Value when `cond` is not zero (NaN counts as true).
        then: Box<Expr>,
        /// The condition.
        cond: Box<Expr>,
        /// Value when `cond` is exactly zero.
        otherwise: Box<Expr>,
    },
    /// `d_ratio`, `min` or `max`.
    Call(Func, Box<Expr>, Box<Expr>),
    /// `source_count`, `has_event` or `strcmp_cpuid_str`.
    IdCall(IdFunc, Ident),
}

/// An identifier after perf's normalisation: escapes removed, `?` kept until the metric
/// is instantiated for a runtime parameter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The normalised text, e.g. `topdown-retiring` or `cpu@UOPS_EXECUTED.THREAD,cmask=1@`.
    pub name: String,
    /// Where it came from.
    pub span: Span,
}

impl Expr {
    /// Visits every node, parents before children.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match &self.kind {
            ExprKind::Num(_) | ExprKind::Literal(_) | ExprKind::Id(_) | ExprKind::IdCall(..) => {}
            ExprKind::Neg(inner) => inner.walk(f),
            ExprKind::Bin(_, lhs, rhs) | ExprKind::Call(_, lhs, rhs) => {
                lhs.walk(f);
                rhs.walk(f);
            }
            ExprKind::If { then, cond, otherwise } => {
                then.walk(f);
                cond.walk(f);
                otherwise.walk(f);
            }
        }
    }

    /// Every identifier in the tree (including `source_count`/`has_event` arguments), in source order.
    pub fn idents(&self) -> Vec<&Ident> {
        let mut out = Vec::new();
        self.walk(&mut |node| match &node.kind {
            ExprKind::Id(id) | ExprKind::IdCall(_, id) => out.push(id),
            _ => {}
        });
        out
    }

    /// Every `#literal` name in the tree.
    pub fn literals(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk(&mut |node| {
            if let ExprKind::Literal(name) = &node.kind {
                out.push(name.as_str());
            }
        });
        out
    }

    /// A copy with every `?` in identifiers replaced by `param` (perf's runtime parameter).
    pub fn with_runtime_param(&self, param: u32) -> Expr {
        let mut copy = self.clone();
        copy.map_idents(&mut |id| {
            if id.name.contains('?') {
                id.name = id.name.replace('?', &param.to_string());
            }
        });
        copy
    }

    /// Applies `f` to every identifier in place.
    pub fn map_idents(&mut self, f: &mut impl FnMut(&mut Ident)) {
        match &mut self.kind {
            ExprKind::Num(_) | ExprKind::Literal(_) => {}
            ExprKind::Id(id) | ExprKind::IdCall(_, id) => f(id),
            ExprKind::Neg(inner) => inner.map_idents(f),
            ExprKind::Bin(_, lhs, rhs) | ExprKind::Call(_, lhs, rhs) => {
                lhs.map_idents(f);
                rhs.map_idents(f);
            }
            ExprKind::If { then, cond, otherwise } => {
                then.map_idents(f);
                cond.map_idents(f);
                otherwise.map_idents(f);
            }
        }
    }

    /// An indented one-node-per-line rendering, for snapshots and `--explain` output.
    pub fn tree(&self) -> String {
        let mut out = String::new();
        self.tree_into(&mut out, 0);
        out
    }

    fn tree_into(&self, out: &mut String, depth: usize) {
        let pad = "  ".repeat(depth);
        let _ = match &self.kind {
            ExprKind::Num(v) => writeln!(out, "{pad}Num {v}"),
            ExprKind::Literal(name) => writeln!(out, "{pad}Literal #{name}"),
            ExprKind::Id(id) => writeln!(out, "{pad}Id {}", id.name),
            ExprKind::IdCall(func, id) => writeln!(out, "{pad}{} {}", func.name(), id.name),
            ExprKind::Neg(inner) => {
                let _ = writeln!(out, "{pad}Neg");
                inner.tree_into(out, depth + 1);
                Ok(())
            }
            ExprKind::Bin(op, lhs, rhs) => {
                let _ = writeln!(out, "{pad}{}", op.symbol());
                lhs.tree_into(out, depth + 1);
                rhs.tree_into(out, depth + 1);
                Ok(())
            }
            ExprKind::Call(func, lhs, rhs) => {
                let _ = writeln!(out, "{pad}{}", func.name());
                lhs.tree_into(out, depth + 1);
                rhs.tree_into(out, depth + 1);
                Ok(())
            }
            ExprKind::If { then, cond, otherwise } => {
                let _ = writeln!(out, "{pad}if");
                cond.tree_into(out, depth + 1);
                let _ = writeln!(out, "{pad}then");
                then.tree_into(out, depth + 1);
                let _ = writeln!(out, "{pad}else");
                otherwise.tree_into(out, depth + 1);
                Ok(())
            }
        };
    }
}

/// Prints the expression back in perf's syntax, fully parenthesised where precedence needs it.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Num(v) if v.is_nan() => write!(f, "NaN"),
            ExprKind::Num(v) => write!(f, "{v:?}"),
            ExprKind::Literal(name) => write!(f, "#{name}"),
            ExprKind::Id(id) => write!(f, "{}", escape_ident(&id.name)),
            ExprKind::IdCall(func, id) => write!(f, "{}({})", func.name(), escape_ident(&id.name)),
            ExprKind::Neg(inner) => write!(f, "-({inner})"),
            ExprKind::Bin(op, lhs, rhs) => write!(f, "({lhs} {} {rhs})", op.symbol()),
            ExprKind::Call(func, lhs, rhs) => write!(f, "{}({lhs}, {rhs})", func.name()),
            ExprKind::If { then, cond, otherwise } => {
                write!(f, "(({then}) if {cond} else ({otherwise}))")
            }
        }
    }
}

/// Escapes the characters a perf identifier can only contain behind a backslash.
pub fn escape_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
