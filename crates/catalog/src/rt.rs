//! Names the generated functions are written with.

use tmetric_model::Needed;
use tmetric_model::catalog::Ref;

/// Needed-events node over metric-local references.
pub(crate) type N = Needed<Ref>;
