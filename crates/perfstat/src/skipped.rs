//! The lines of a log that are not perf's output (a benchmark's own lines, a shell prompt, mail
//! text), summarised in constant memory: how many, and where they lie relative to perf's blocks.

use std::fmt;

/// How many ranges of lines each stretch keeps to show.
const RANGES: usize = 4;
/// How many skipped lines are kept with their text.
const SAMPLES: usize = 3;

/// Skipped lines in one kind of place: a count and the first few ranges of line numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stretch {
    /// Lines.
    pub lines: usize,
    /// The first ranges of consecutive lines (1-based, inclusive).
    pub ranges: Vec<(usize, usize)>,
    /// Ranges not kept.
    pub more_ranges: usize,
    /// The last line added, to extend a range not kept.
    last: usize,
}

impl Stretch {
    fn add(&mut self, line: usize) {
        self.lines += 1;
        let extends = self.last != 0 && line == self.last + 1;
        self.last = line;
        let kept = self.ranges.len();
        match self.ranges.last_mut() {
            Some(range) if extends && range.1 + 1 == line => range.1 = line,
            // A range beyond the kept ones goes on.
            _ if extends && self.more_ranges > 0 => {}
            _ if kept < RANGES => self.ranges.push((line, line)),
            _ => self.more_ranges += 1,
        }
    }

    fn absorb(&mut self, other: &Stretch) {
        self.lines += other.lines;
        for &(a, b) in &other.ranges {
            let kept = self.ranges.len();
            let more = self.more_ranges;
            match self.ranges.last_mut() {
                Some(range) if range.1 + 1 == a && more == 0 => range.1 = b,
                _ if kept < RANGES => self.ranges.push((a, b)),
                _ => self.more_ranges += 1,
            }
        }
        self.more_ranges += other.more_ranges;
        if other.last != 0 {
            self.last = other.last;
        }
    }
}

impl fmt::Display for Stretch {
    /// `lines 1-4, 9 and 2 more ranges`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self
            .ranges
            .iter()
            .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
            .collect();
        let word = if self.lines == 1 { "line" } else { "lines" };
        write!(f, "{word} {}", shown.join(", "))?;
        if self.more_ranges > 0 {
            write!(f, " and {} more place(s)", self.more_ranges)?;
        }
        Ok(())
    }
}

/// Every skipped line of a log, by where it lies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Before the first line of perf's output.
    pub before: Stretch,
    /// Between lines of one perf block (`-I` output interleaved with the workload's).
    pub inside: Stretch,
    /// After one block's footer and before the next block.
    pub between: Stretch,
    /// After the last line of perf's output.
    pub after: Stretch,
    /// The first skipped lines: line and why.
    pub first: Vec<(usize, String)>,
    /// Since the last line of perf's output, not yet placed.
    pending: Stretch,
}

impl Skipped {
    /// Every skipped line.
    pub fn lines(&self) -> usize {
        self.before.lines
            + self.inside.lines
            + self.between.lines
            + self.after.lines
            + self.pending.lines
    }

    /// Whether the next line added is kept with its text.
    pub(crate) fn wants_sample(&self) -> bool {
        self.first.len() < SAMPLES
    }

    /// A line that is not perf's.
    pub(crate) fn add(&mut self, line: usize, why: &str) {
        self.pending.add(line);
        if self.first.len() < SAMPLES {
            self.first.push((line, why.to_string()));
        }
    }

    /// A line of perf's output follows the pending ones: `seen` whether perf output came
    /// before them, `open` whether its block had not ended.
    pub(crate) fn perf_line(&mut self, seen: bool, open: bool) {
        if self.pending.lines == 0 {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let into = match (seen, open) {
            (false, _) => &mut self.before,
            (true, true) => &mut self.inside,
            (true, false) => &mut self.between,
        };
        into.absorb(&pending);
    }

    /// The end of the input: what is pending lies after perf's output (or before it, when
    /// there was none).
    pub(crate) fn end(&mut self, seen: bool) {
        let pending = std::mem::take(&mut self.pending);
        if seen { self.after.absorb(&pending) } else { self.before.absorb(&pending) }
    }
}

impl fmt::Display for Skipped {
    /// `7 lines that are not perf's output: 4 before its first block (lines 1-4), 2 inside a
    /// block (lines 9, 15), 1 after its last (line 30)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.lines();
        let words = if total == 1 { "line that is" } else { "lines that are" };
        write!(f, "{total} {words} not perf's output")?;
        let mut parts = Vec::new();
        for (stretch, place) in [
            (&self.before, "before its first block"),
            (&self.inside, "inside a block"),
            (&self.between, "between blocks"),
            (&self.after, "after its last block"),
            (&self.pending, "not yet placed"),
        ] {
            if stretch.lines > 0 {
                parts.push(format!("{} {place} ({stretch})", stretch.lines));
            }
        }
        if !parts.is_empty() {
            write!(f, ": {}", parts.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_and_ranges() {
        let mut s = Skipped::default();
        for line in 1..=4 {
            s.add(line, "x");
        }
        s.perf_line(false, false);
        s.add(9, "x");
        s.add(15, "x");
        s.perf_line(true, true);
        s.add(20, "x");
        s.perf_line(true, false);
        s.add(30, "x");
        s.end(true);
        assert_eq!(
            s.to_string(),
            "8 lines that are not perf's output: 4 before its first block (lines 1-4), 2 inside a block (lines 9, 15), 1 between blocks (line 20), 1 after its last block (line 30)"
        );
        assert_eq!(s.first.len(), 3);
    }

    #[test]
    fn ranges_stay_few() {
        let mut s = Stretch::default();
        for line in (1..100).step_by(2) {
            s.add(line);
        }
        s.add(100);
        assert_eq!(s.ranges.len(), RANGES);
        assert_eq!(s.lines, 51);
        assert_eq!(s.to_string(), "lines 1, 3, 5, 7 and 46 more place(s)");
    }
}
