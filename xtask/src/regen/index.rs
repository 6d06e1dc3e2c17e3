//! The generated index: every model's module, the cpuid map in mapfile order, and the shared
//! tables' declarations.

use std::collections::HashMap;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::{GEN_DIR, with_header};

/// The index: every vintage's models (`vintage_models`, in order, base first) and cpuid map in
/// mapfile order, and the shared tables; as (path, text, printed). `MODELS` and `CPUID_MAP` are
/// the base vintage's.
pub(super) fn index_source(
    loaded: &[super::Loaded],
    arches: &[Ident],
    vintage_models: &[Vec<(String, &tmetric_pmu_events::Table)>],
) -> (String, String, bool) {
    let mut statics = Vec::new();
    let mut vintages = Vec::new();
    for (v, (load, model_paths)) in loaded.iter().zip(vintage_models).enumerate() {
        let mut position = HashMap::new();
        let mut model_refs = Vec::new();
        for (i, (path, table)) in model_paths.iter().enumerate() {
            let path: TokenStream = path.parse().expect("module paths are Rust paths");
            model_refs.push(quote! { &#path::MODEL });
            position.insert((table.arch.clone(), table.name.clone()), i);
        }
        let mut rows = Vec::new();
        for arch in &load.tree.arches {
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
        let (models, map) = if v == 0 {
            (format_ident!("MODELS"), format_ident!("CPUID_MAP"))
        } else {
            let suffix = load.version.replace('.', "_");
            (format_ident!("MODELS_V{}", suffix), format_ident!("CPUID_MAP_V{}", suffix))
        };
        let doc_models = format!(
            "Every model of perf {}'s vendor tree, sorted by architecture then name.",
            load.version
        );
        let doc_map = format!(
            "`mapfile.csv` rows of perf {}, every architecture, in file order.",
            load.version
        );
        statics.push(quote! {
            #[doc = #doc_models]
            pub static #models: &[&Model] = &[#(#model_refs),*];
            #[doc = #doc_map]
            pub static #map: &[CpuidRow] = &[#(#rows),*];
        });
        let (version, kernel) = (&load.version, &load.kernel);
        vintages.push((
            super::vintage_key(version),
            quote! { Vintage { version: #version, kernel: #kernel, models: #models, cpuid_map: #map } },
        ));
    }
    let base_version = &loaded[0].version;
    vintages.sort_by(|a, b| a.0.cmp(&b.0));
    let base_index = vintages
        .iter()
        .position(|(key, _)| *key == super::vintage_key(base_version))
        .expect("the base is a vintage");
    let vintages = vintages.into_iter().map(|(_, tokens)| tokens);
    let index = quote! {
        use tmetric_model::catalog::{CpuidRow, Model, Tables, Vintage};
        #(pub mod #arches;)*
        pub mod funcs;
        pub mod metrics;

        /// The strings and events of every model, embedded once.
        pub static TABLES: Tables = Tables::new(
            include_str!("names.txt"),
            include_bytes!("names.idx"),
            include_bytes!("strings.bin"),
            include_bytes!("strings.idx"),
            include_bytes!("descriptions.bin"),
            include_bytes!("descriptions.idx"),
            include_bytes!("events.bin"),
            include_bytes!("events.idx"),
            include_bytes!("event_lists.bin"),
            include_bytes!("event_lists.idx"),
        );

        #(#statics)*

        /// Every vintage, oldest first.
        pub static VINTAGES: &[Vintage] = &[#(#vintages),*];

        /// The index in `VINTAGES` of the base vintage (`MODELS`, `CPUID_MAP`).
        pub const BASE_VINTAGE: usize = #base_index;
    };
    // `lib.rs` includes the index with `include!`, where inner doc comments cannot stand.
    (
        format!("{GEN_DIR}/mod.rs"),
        with_header(
            "the index of every vintage's models, the cpuid maps and the shared tables",
            &index.to_string(),
        )
        .replace("//! ", "// "),
        true,
    )
}
