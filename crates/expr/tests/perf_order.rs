//! perf's own order of a metric's identifiers: the needed-events pass over
//! [`tmetric_expr::PerfIds`] places every identifier where perf 6.1's `expr__find_ids` put it
//! in its hashmap, over the expressions of all of perf's tables (recorded from its own test,
//! `data/perf-6.1-hash-order.txt`). The hashmap, the key hash and the joins of
//! util/expr.y are the same in 6.12.

use tmetric_expr::{Facts, Ident, Literal, PerfIds, needed_in, parse};

struct Known(Vec<(Literal, f64)>);

impl Facts for Known {
    fn literal(&self, literal: Literal) -> Option<f64> {
        self.0.iter().find(|(l, _)| *l == literal).map(|(_, v)| *v)
    }
    fn has_event(&self, _: &Ident) -> bool {
        true
    }
    fn cpuid_match(&self, _: &Ident) -> f64 {
        1.0
    }
}

struct Block {
    expr: String,
    literals: Vec<(Literal, f64)>,
    ids: Vec<(usize, String)>,
}

fn blocks() -> Vec<Block> {
    let text = include_str!("data/perf-6.1-hash-order.txt");
    let mut out: Vec<Block> = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (kind, rest) = line.split_once(' ').expect("a kind and a value");
        match kind {
            "expr" => out.push(Block { expr: rest.into(), literals: Vec::new(), ids: Vec::new() }),
            "literal" => {
                let (name, value) = rest.split_once(' ').expect("name and value");
                let lit = Literal::from_name(&name[1..]).expect("a known literal");
                out.last_mut().unwrap().literals.push((lit, value.parse().unwrap()));
            }
            "id" => {
                let (place, id) = rest.split_once(' ').expect("place and id");
                out.last_mut().unwrap().ids.push((place.parse().unwrap(), id.into()));
            }
            _ => panic!("unknown line {line}"),
        }
    }
    out
}

#[test]
fn every_identifier_is_where_perfs_hashmap_put_it() {
    let blocks = blocks();
    assert!(blocks.len() > 600, "{} expressions", blocks.len());
    let mut larger = 0;
    for block in &blocks {
        let expr = parse(&block.expr).unwrap_or_else(|e| panic!("{}: {e}", block.expr));
        let needed = needed_in::<PerfIds<&str>>(&expr, &Known(block.literals.clone()))
            .unwrap_or_else(|e| panic!("{}: {e}", block.expr));
        let order: Vec<&str> = needed.ids.iter().copied().collect();
        for (place, id) in &block.ids {
            assert_eq!(
                order.iter().position(|x| x == id).map(|p| p + 1),
                Some(*place),
                "{}: perf put `{id}` at {place}; ours: {order:?}",
                block.expr
            );
        }
        larger += usize::from(order.len() >= 5);
    }
    // Tables that had to grow (5 ids and more) are well represented.
    assert!(larger > 100, "{larger}");
}

#[test]
fn the_map_grows_and_deletes_as_libbpfs() {
    // With 4 buckets, a fourth key makes the table grow to 8 and re-inserts in iteration
    // order at the head of each bucket; a deleted key leaves the others in place.
    let mut ids: PerfIds<String> = PerfIds::new();
    for k in ["a", "b", "c"] {
        ids.insert(k.to_string());
    }
    let before: Vec<String> = ids.iter().cloned().collect();
    ids.insert("b".into());
    assert_eq!(ids.iter().cloned().collect::<Vec<_>>(), before, "a present key keeps its place");
    ids.insert("d".into());
    assert_eq!(ids.len(), 4);
    assert!(ids.remove("c"));
    assert!(!ids.contains("c") && ids.contains("d"));
    assert_eq!(ids.len(), 3);
}
