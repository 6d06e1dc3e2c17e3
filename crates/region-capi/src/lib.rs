//! tmetric-region's C ABI (`crates/region/include/tmetric_region.h`): one [`Measurement`]
//! per calling thread, regions started and stopped by name, the last sample's values, a
//! report, and the last error text.
//!
//! The only crate besides `tmetric-runtime` with `unsafe`, and only where a C ABI cannot do
//! without: `#[unsafe(no_mangle)]`, which gives each function its C name, and one block in
//! [`c_text`] that reads the caller's NUL-terminated strings. The crate denies `unsafe_code`
//! and allows it item by item; every block carries a `// SAFETY:` comment (enforced by
//! `clippy::undocumented_unsafe_blocks`).
//!
//! Build: `cargo rustc --release -p tmetric-region-capi --lib --crate-type staticlib`.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_double, c_int};

use tmetric_region::{Measurement, Sample, split_items};

struct State {
    measurement: Option<Measurement>,
    last: Option<Sample>,
    error: CString,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        measurement: None,
        last: None,
        error: CString::default(),
    });
}

/// The caller's C string, or `None` for NULL or text that is not UTF-8.
#[allow(unsafe_code)]
fn c_text(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the header documents that every `const char *` argument is NULL (checked above)
    // or a NUL-terminated string that stays valid for the call.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().ok().map(str::to_string)
}

fn fail(state: &mut State, text: String) -> c_int {
    state.error = CString::new(text.replace('\0', " ")).unwrap_or_default();
    -1
}

/// `int tmetric_region_init(const char *items)`: plans and opens `items` (comma-separated
/// metrics, metric groups or events) for the calling thread. 0 on success, -1 on error.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_init(items: *const c_char) -> c_int {
    let text = c_text(items);
    STATE.with_borrow_mut(|state| {
        let Some(text) = text else {
            return fail(state, "tmetric_region_init: items is NULL or not UTF-8".into());
        };
        let items = split_items(&text);
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        state.measurement = None;
        match Measurement::new(&refs) {
            Ok(m) => {
                state.measurement = Some(m);
                0
            }
            Err(e) => fail(state, format!("tmetric_region_init: {e}")),
        }
    })
}

/// `int tmetric_region_start(const char *name)`: starts region `name`.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_start(name: *const c_char) -> c_int {
    let name = c_text(name);
    STATE.with_borrow_mut(|state| {
        let Some(name) = name else {
            return fail(state, "tmetric_region_start: name is NULL or not UTF-8".into());
        };
        let Some(m) = state.measurement.as_mut() else {
            return fail(state, "tmetric_region_start: call tmetric_region_init first".into());
        };
        match m.begin(&name) {
            Ok(()) => 0,
            Err(e) => fail(state, format!("tmetric_region_start: {e}")),
        }
    })
}

/// `int tmetric_region_stop(void)`: stops the open region; its sample becomes the last.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_stop() -> c_int {
    STATE.with_borrow_mut(|state| {
        let Some(m) = state.measurement.as_mut() else {
            return fail(state, "tmetric_region_stop: call tmetric_region_init first".into());
        };
        // Only the total is updated here; the sample is built when a value is asked for.
        match m.end_total() {
            Ok(()) => {
                state.last = None;
                0
            }
            Err(e) => fail(state, format!("tmetric_region_stop: {e}")),
        }
    })
}

/// `double tmetric_region_value(const char *name)`: metric or count `name` of the last
/// sample (metrics scaled as printed, task-clock in msec); NaN when there is none.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_value(name: *const c_char) -> c_double {
    let name = c_text(name);
    STATE.with_borrow_mut(|state| {
        if state.last.is_none() {
            state.last = state.measurement.as_mut().and_then(Measurement::last);
        }
        let (Some(name), Some(last)) = (name, state.last.as_ref()) else { return f64::NAN };
        last.metric(&name).or_else(|| last.count(&name)).unwrap_or(f64::NAN)
    })
}

/// `int tmetric_region_report(void)`: prints every region's total to standard error.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_report() -> c_int {
    STATE.with_borrow_mut(|state| {
        let Some(m) = state.measurement.as_mut() else {
            return fail(state, "tmetric_region_report: call tmetric_region_init first".into());
        };
        match m.report(&mut std::io::stderr()) {
            Ok(()) => 0,
            Err(e) => fail(state, format!("tmetric_region_report: {e}")),
        }
    })
}

/// `const char *tmetric_region_error(void)`: the last error on this thread ("" if none);
/// valid until the next call that fails.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_error() -> *const c_char {
    STATE.with_borrow(|state| state.error.as_ptr())
}

/// `void tmetric_region_finish(void)`: closes the calling thread's counters.
#[allow(unsafe_code)] // `no_mangle`: the C name.
#[unsafe(no_mangle)]
pub extern "C" fn tmetric_region_finish() {
    STATE.with_borrow_mut(|state| {
        state.measurement = None;
        state.last = None;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_reported_through_the_error_text() {
        assert_eq!(tmetric_region_start(c"x".as_ptr()), -1);
        let text = c_text(tmetric_region_error()).unwrap();
        assert!(text.contains("call tmetric_region_init first"), "{text}");
        assert_eq!(tmetric_region_init(std::ptr::null()), -1);
        assert!(c_text(tmetric_region_error()).unwrap().contains("NULL"));
        assert!(tmetric_region_value(c"page-faults".as_ptr()).is_nan());
    }
}
