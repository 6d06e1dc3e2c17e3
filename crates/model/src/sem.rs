//! perf 6.12's expression semantics as plain functions, shared by the interpreter in
//! `tmetric-expr` and by the generated metric code, so both compute bit-identical values.
//!
//! Evaluation rules are perf's `util/expr.y` with `compute_ids` off (`expr__parse`); the
//! [`Needed`] combinators are the same grammar with `compute_ids` on (`expr__find_ids` in util/expr.c).

/// Why a metric has no value at all (perf leaves such a metric blank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fail {
    /// `x % 0`: perf aborts the expression.
    RemainderByZero,
    /// A `#literal` that has no value on this machine.
    Literal,
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fail::RemainderByZero => "remainder by zero",
            Fail::Literal => "a `#literal` has no value on this machine",
        })
    }
}

impl std::error::Error for Fail {}

/// `a + b`, as a function for the needed-events combinators.
#[inline]
pub fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// `a - b`.
#[inline]
pub fn sub(a: f64, b: f64) -> f64 {
    a - b
}

/// `a * b`.
#[inline]
pub fn mul(a: f64, b: f64) -> f64 {
    a * b
}

/// `a < b`: NaN if either side is NaN, else 1 or 0.
#[inline]
pub fn lt(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { f64::from(u8::from(a < b)) }
}

/// `a > b`: NaN if either side is NaN, else 1 or 0.
#[inline]
pub fn gt(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { f64::from(u8::from(a > b)) }
}

/// `a / b`: NaN when `b` is zero of either sign.
#[inline]
pub fn div(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

/// 2^63, the first double past `i64::MAX`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// C's `(long)x` on x86-64: NaN and out-of-range values become the "integer indefinite"
/// `LONG_MIN`, unlike Rust's saturating `as`.
#[inline]
fn c_long(x: f64) -> i64 {
    if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) { i64::MIN } else { x as i64 }
}

/// `a % b` as `(long)a % (long)b`. Fails when `b` is zero (perf aborts), and also when
/// `(long)b` is zero, where perf would die of SIGFPE.
#[inline]
pub fn rem(a: f64, b: f64) -> Result<f64, Fail> {
    if b == 0.0 {
        return Err(Fail::RemainderByZero);
    }
    let divisor = c_long(b);
    if divisor == 0 {
        return Err(Fail::RemainderByZero);
    }
    Ok(c_long(a).wrapping_rem(divisor) as f64)
}

/// `|`: logical or; a finite operand short-circuits even against NaN.
#[inline]
pub fn or(a: f64, b: f64) -> f64 {
    match (a.is_finite(), b.is_finite()) {
        (true, true) => f64::from(u8::from(a != 0.0 || b != 0.0)),
        (true, false) => {
            if a == 0.0 {
                b
            } else {
                1.0
            }
        }
        (false, true) => {
            if b == 0.0 {
                a
            } else {
                1.0
            }
        }
        (false, false) => f64::NAN,
    }
}

/// `&`: logical and; a finite operand short-circuits even against NaN.
#[inline]
pub fn and(a: f64, b: f64) -> f64 {
    match (a.is_finite(), b.is_finite()) {
        (true, true) => f64::from(u8::from(a != 0.0 && b != 0.0)),
        (true, false) => {
            if a == 0.0 {
                0.0
            } else {
                b
            }
        }
        (false, true) => {
            if b == 0.0 {
                0.0
            } else {
                a
            }
        }
        (false, false) => f64::NAN,
    }
}

/// `^`: logical exclusive or of two finite values, else NaN.
#[inline]
pub fn xor(a: f64, b: f64) -> f64 {
    if a.is_finite() && b.is_finite() {
        f64::from(u8::from((a != 0.0) != (b != 0.0)))
    } else {
        f64::NAN
    }
}

/// `d_ratio(a, b)`: 0 when `b` is zero, else `a / b`.
#[inline]
pub fn d_ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// `min(a, b)` as C's `a < b ? a : b`: if either is NaN the result is `b`.
#[inline]
pub fn min(a: f64, b: f64) -> f64 {
    if a < b { a } else { b }
}

/// `max(a, b)` as C's `a > b ? a : b`: if either is NaN the result is `b`.
#[inline]
pub fn max(a: f64, b: f64) -> f64 {
    if a > b { a } else { b }
}

/// `then if cond else otherwise`: only an exact zero selects `otherwise`; NaN is true.
#[inline]
pub fn if_else(then: f64, cond: f64, otherwise: f64) -> f64 {
    if cond == 0.0 { otherwise } else { then }
}

/// A `has_event` probe as perf sees it: any non-zero (NaN included) is true, 1; else 0.
#[inline]
pub fn truth(probe: f64) -> f64 {
    if probe == 0.0 { 0.0 } else { 1.0 }
}

/// A literal's value, failing like perf's lexer when it is NaN (unknown on this machine).
#[inline]
pub fn literal(value: f64) -> Result<f64, Fail> {
    if value.is_nan() { Err(Fail::Literal) } else { Ok(value) }
}

/// The identifiers a needed-events node carries, and how two nodes' identifiers are joined
/// (`union_expr`). A plain list keeps first-seen order; [`PerfIds`] keeps perf's own hashmap
/// order, which decides the order of events in the groups perf builds.
pub trait IdSet<I>: Default {
    /// The set of one identifier.
    fn single(id: I) -> Self;
    /// Both sets' identifiers.
    fn union(self, other: Self) -> Self;
}

impl<I: PartialEq> IdSet<I> for Vec<I> {
    fn single(id: I) -> Self {
        vec![id]
    }

    fn union(mut self, other: Self) -> Self {
        for id in other {
            if !self.contains(&id) {
                self.push(id);
            }
        }
        self
    }
}

/// One node of the needed-events pass: a finite constant, or BOTTOM (NaN: known only at
/// run time) with the identifiers that decide it. `I` is whatever names an identifier; `S`
/// holds them (a list in first-seen order unless asked otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct Needed<I, S = Vec<I>> {
    /// A finite value when the node folded to a constant, NaN otherwise.
    pub value: f64,
    /// The identifiers needed, without duplicates.
    pub ids: S,
    marker: std::marker::PhantomData<fn() -> I>,
}

impl<I: PartialEq, S: IdSet<I>> Needed<I, S> {
    /// A folded constant (NaN for the keyword `NaN`, which perf cannot tell from BOTTOM).
    pub fn constant(value: f64) -> Needed<I, S> {
        Needed { value, ids: S::default(), marker: std::marker::PhantomData }
    }

    /// An identifier: BOTTOM, needing itself.
    pub fn id(id: I) -> Needed<I, S> {
        Needed { value: f64::NAN, ids: S::single(id), marker: std::marker::PhantomData }
    }

    /// A literal: its value, or a failure if it has none.
    pub fn literal(value: f64) -> Result<Needed<I, S>, Fail> {
        literal(value).map(Needed::constant)
    }

    fn is_const(&self) -> bool {
        self.value.is_finite()
    }

    /// perf's `union_expr`: BOTTOM with both id sets.
    pub fn union(mut self, other: Needed<I, S>) -> Needed<I, S> {
        self.ids = self.ids.union(other.ids);
        self.value = f64::NAN;
        self
    }

    /// Unary minus keeps the ids.
    pub fn negate(mut self) -> Needed<I, S> {
        self.value = -self.value;
        self
    }

    /// `+ - * < > ^`: folded when both sides are constant. `x * 0` is deliberately not
    /// folded: the JSON uses `+ 0 * slots` to pull events in.
    pub fn arith(self, other: Needed<I, S>, op: fn(f64, f64) -> f64) -> Needed<I, S> {
        if self.is_const() && other.is_const() {
            Needed::constant(op(self.value, other.value))
        } else {
            self.union(other)
        }
    }

    /// `/`: a constant zero divisor gives NaN and drops the numerator's ids.
    pub fn divide(self, other: Needed<I, S>) -> Needed<I, S> {
        if other.value == 0.0 {
            Needed::constant(f64::NAN)
        } else {
            self.arith(other, |a, b| a / b)
        }
    }

    /// `%`: a constant zero divisor breaks the metric.
    pub fn remainder(self, other: Needed<I, S>) -> Result<Needed<I, S>, Fail> {
        if other.value == 0.0 {
            Err(Fail::RemainderByZero)
        } else if self.is_const() && other.is_const() {
            rem(self.value, other.value).map(Needed::constant)
        } else {
            Ok(self.union(other))
        }
    }

    /// `d_ratio`: a constant zero divisor gives 0 and drops the numerator's ids.
    pub fn d_ratio(self, other: Needed<I, S>) -> Needed<I, S> {
        if other.value == 0.0 { Needed::constant(0.0) } else { self.arith(other, d_ratio) }
    }

    /// `min`/`max`: never folded, even over two constants (util/expr.y folds only arithmetic).
    pub fn min_max(self, other: Needed<I, S>) -> Needed<I, S> {
        self.union(other)
    }

    /// `|`: a constant operand short-circuits: `1 | X` is 1, `0 | X` is X.
    pub fn or(self, other: Needed<I, S>) -> Needed<I, S> {
        self.logic(other, or, true)
    }

    /// `&`: a constant operand short-circuits: `0 & X` is 0, `1 & X` is X.
    pub fn and(self, other: Needed<I, S>) -> Needed<I, S> {
        self.logic(other, and, false)
    }

    fn logic(self, other: Needed<I, S>, op: fn(f64, f64) -> f64, is_or: bool) -> Needed<I, S> {
        let short = |constant: f64, rest: Needed<I, S>| match (is_or, constant == 0.0) {
            (true, true) | (false, false) => rest,
            (true, false) => Needed::constant(1.0),
            (false, true) => Needed::constant(0.0),
        };
        match (self.is_const(), other.is_const()) {
            (true, true) => Needed::constant(op(self.value, other.value)),
            (true, false) => short(self.value, other),
            (false, true) => short(other.value, self),
            (false, false) => self.union(other),
        }
    }

    /// `then if cond else otherwise`: a constant condition keeps one branch; two equal
    /// constant branches need nothing.
    pub fn if_else(
        then: Needed<I, S>,
        cond: Needed<I, S>,
        otherwise: Needed<I, S>,
    ) -> Needed<I, S> {
        if cond.value == 0.0 {
            otherwise
        } else if cond.is_const() {
            then
        } else if then.value == otherwise.value {
            Needed::constant(then.value)
        } else {
            // `union_expr($1, union_expr($3, $5))`: the order perf joins them in.
            then.union(cond.union(otherwise))
        }
    }
}

/// perf's set of metric identifiers as it really is: libbpf's hashmap
/// (tools/lib/bpf/hashmap.c) keyed by util/expr.c's `key_hash`, whose iteration order is the
/// order of the events in the groups perf builds from a metric (`metricgroup__build_event_string`).
/// Buckets are lists with the newest entry first; the table starts at 4 buckets and doubles
/// before an insert would fill it beyond 3/4 (`hashmap_needs_to_grow`), re-inserting entries
/// in iteration order; deleting never shrinks it. Joining two sets inserts the smaller one's
/// entries into the larger (`ids__union`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfIds<K> {
    buckets: Vec<Vec<K>>,
    cap_bits: u32,
    len: usize,
}

/// util/expr.c `key_hash`: `h = h * 31 + c` over the key's bytes as C's signed `char`.
pub fn perf_key_hash(key: &str) -> u64 {
    key.bytes().fold(0u64, |h, c| h.wrapping_mul(31).wrapping_add(c as i8 as i64 as u64))
}

/// hashmap.h `hash_bits` on LP64: the top `bits` bits of `h` times 2^64 / phi.
fn hash_bits(h: u64, bits: u32) -> usize {
    if bits == 0 { 0 } else { (h.wrapping_mul(11_400_714_819_323_198_485) >> (64 - bits)) as usize }
}

impl<K> Default for PerfIds<K> {
    fn default() -> Self {
        PerfIds { buckets: Vec::new(), cap_bits: 0, len: 0 }
    }
}

impl<K: AsRef<str> + PartialEq> PerfIds<K> {
    /// An empty set (no buckets yet, as `hashmap__new`).
    pub fn new() -> PerfIds<K> {
        PerfIds { buckets: Vec::new(), cap_bits: 0, len: 0 }
    }

    /// The number of identifiers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn bucket_of(&self, key: &str) -> usize {
        hash_bits(perf_key_hash(key), self.cap_bits)
    }

    /// Whether `key` is in the set (`hashmap__find`).
    pub fn contains(&self, key: &str) -> bool {
        !self.buckets.is_empty()
            && self.buckets[self.bucket_of(key)].iter().any(|k| k.as_ref() == key)
    }

    /// `hashmap__set`: a key already present keeps its place; a new one goes to the head of
    /// its bucket, after the table grew if it had to.
    pub fn insert(&mut self, key: K) {
        if self.contains(key.as_ref()) {
            return;
        }
        let cap = self.buckets.len();
        if cap == 0 || (self.len + 1) * 4 / 3 > cap {
            let bits = (self.cap_bits + 1).max(2);
            let mut grown: Vec<Vec<K>> = (0..1usize << bits).map(|_| Vec::new()).collect();
            for old in std::mem::take(&mut self.buckets) {
                for k in old {
                    grown[hash_bits(perf_key_hash(k.as_ref()), bits)].insert(0, k);
                }
            }
            self.buckets = grown;
            self.cap_bits = bits;
        }
        let b = self.bucket_of(key.as_ref());
        self.buckets[b].insert(0, key);
        self.len += 1;
    }

    /// `hashmap__delete`: the others keep their places.
    pub fn remove(&mut self, key: &str) -> bool {
        if self.buckets.is_empty() {
            return false;
        }
        let b = self.bucket_of(key);
        match self.buckets[b].iter().position(|k| k.as_ref() == key) {
            Some(i) => {
                self.buckets[b].remove(i);
                self.len -= 1;
                true
            }
            None => false,
        }
    }

    /// The keys in iteration order (`hashmap__for_each_entry`).
    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.buckets.iter().flatten()
    }

    /// The same table with each key converted (an owned copy of borrowed keys): every key
    /// keeps its bucket and place.
    pub fn map_keys<L>(self, f: impl Fn(K) -> L) -> PerfIds<L> {
        PerfIds {
            buckets: self.buckets.into_iter().map(|b| b.into_iter().map(&f).collect()).collect(),
            cap_bits: self.cap_bits,
            len: self.len,
        }
    }

    /// `ids__union`: the smaller set's keys inserted into the larger (the first when equal).
    pub fn join(self, other: PerfIds<K>) -> PerfIds<K> {
        let (mut into, from) = if self.len < other.len { (other, self) } else { (self, other) };
        for bucket in from.buckets {
            for k in bucket {
                into.insert(k);
            }
        }
        into
    }
}

impl<K: AsRef<str> + PartialEq> IdSet<K> for PerfIds<K> {
    fn single(id: K) -> Self {
        let mut set = PerfIds::new();
        set.insert(id);
        set
    }

    fn union(self, other: Self) -> Self {
        self.join(other)
    }
}
