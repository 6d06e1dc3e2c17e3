//! perf's legacy event names (the software and generic hardware symbols, the hardware cache
//! events and the names perf prints for each `(type, config)`), from the one table in
//! `tmetric-names`, which every reader of perf's names shares.

pub use tmetric_names::{
    DETAILED, HARDWARE, Legacy, SOFTWARE, cache_config, hardware_config, is_cache_name, legacy,
    legacy_name, software_config,
};
