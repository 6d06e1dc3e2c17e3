//! The generated index: every model's module, the cpuid map in mapfile order, and the shared
//! tables' declarations.

use std::collections::HashMap;

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use super::{GEN_DIR, with_header};

/// The index: every model (`model_paths`, in order), the cpuid map in mapfile order, and
/// the shared tables; as (path, text, printed).
pub(super) fn index_source(
    tree: &tmetric_pmu_events::Tree,
    arches: &[Ident],
    model_paths: &[(String, &tmetric_pmu_events::Table)],
) -> (String, String, bool) {
    let mut position = HashMap::new();
    let mut model_refs = Vec::new();
    for (i, (path, table)) in model_paths.iter().enumerate() {
        let path: TokenStream = path.parse().expect("module paths are Rust paths");
        model_refs.push(quote! { &#path::MODEL });
        position.insert((table.arch.clone(), table.name.clone()), i);
    }
    let mut rows = Vec::new();
    for arch in &tree.arches {
        for row in &arch.mapfile {
            let Some(&model) = position.get(&(arch.name.clone(), row.dir.clone())) else {
                continue;
            };
            let (a, regex, version, event_type) =
                (&arch.name, &row.cpuid_regex, &row.version, &row.event_type);
            rows.push(quote! {
                CpuidRow { arch: #a, regex: #regex, version: #version, event_type: #event_type, model: #model }
            });
        }
    }
    let index = quote! {
        use tmetric_model::catalog::{CpuidRow, Model, Tables};
        #(pub mod #arches;)*
        pub mod funcs;
        pub mod metrics;

        /// The strings and events of every model, embedded once.
        pub static TABLES: Tables = Tables::new(
            include_str!("strings.txt"),
            include_bytes!("strings.idx"),
            include_bytes!("descriptions.bin"),
            include_bytes!("descriptions.idx"),
            include_bytes!("events.bin"),
            include_bytes!("events.idx"),
        );

        /// Every model, sorted by architecture then name.
        pub static MODELS: &[&Model] = &[#(#model_refs),*];

        /// `mapfile.csv` rows of every architecture, in file order.
        pub static CPUID_MAP: &[CpuidRow] = &[#(#rows),*];
    };
    // `lib.rs` includes the index with `include!`, where inner doc comments cannot stand.
    (
        format!("{GEN_DIR}/mod.rs"),
        with_header(
            "the index of every model, the cpuid map and the shared tables",
            &index.to_string(),
        )
        .replace("//! ", "// "),
        true,
    )
}
