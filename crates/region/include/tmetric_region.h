/* tmetric_region.h: the C ABI of tmetric-region (crates/region-capi/src/lib.rs).
 *
 * Measures regions of code in the calling thread with tmetric's metrics. Each thread has its
 * own measurement: call tmetric_region_init on the thread that runs the regions.
 *
 * Every `const char *` argument is NULL or a NUL-terminated UTF-8 string valid for the call.
 * Functions returning int return 0 on success and -1 on error; tmetric_region_error() then
 * says why.
 *
 * Build the library with
 *   cargo rustc --release -p tmetric-region-capi --lib --crate-type staticlib
 * and link target/release/libtmetric_region_capi.a with -lpthread -ldl -lm
 * (crates/region/examples/c/build.sh does both and runs the example).
 */
#ifndef TMETRIC_REGION_H
#define TMETRIC_REGION_H

#ifdef __cplusplus
extern "C" {
#endif

/* Plans and opens `items` for the calling thread: comma-separated metrics, metric groups
 * or events, as `tmetric stat -M`/`-e` take them ("page-faults,task-clock", "TopdownL1",
 * "{slots,topdown-retiring}"). Fails when they need more than one counter group. */
int tmetric_region_init(const char *items);

/* Starts region `name` (regions do not nest). */
int tmetric_region_start(const char *name);

/* Stops the open region and adds it to its region's total. */
int tmetric_region_stop(void);

/* Metric or event `name` in the last stopped region (metrics scaled as printed, such as
 * percentages; task-clock in msec); NaN when there is no such value. */
double tmetric_region_value(const char *name);

/* Prints every region's total to standard error, as tmetric stat prints counts. */
int tmetric_region_report(void);

/* The last error on this thread, or "". Valid until the next failing call. */
const char *tmetric_region_error(void);

/* Closes the calling thread's counters. */
void tmetric_region_finish(void);

#ifdef __cplusplus
}
#endif

#endif /* TMETRIC_REGION_H */
