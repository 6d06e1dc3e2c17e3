/* Measures two regions from C: touching fresh pages and a busy loop, with page-faults and
 * task-clock (software events: they count on any Linux machine). Built and run by build.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tmetric_region.h"

enum { PAGES = 2000, PAGE = 4096 };

static int fail(const char *what) {
	fprintf(stderr, "%s: %s\n", what, tmetric_region_error());
	return 1;
}

int main(void) {
	if (tmetric_region_init("page-faults,task-clock") != 0)
		return fail("init");

	/* A fresh anonymous mapping faults once per page on first write. */
	char *memory = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (memory == MAP_FAILED)
		return 1;
	if (tmetric_region_start("touch") != 0)
		return fail("start");
	for (int p = 0; p < PAGES; p++)
		memory[(size_t)p * PAGE] = 1;
	if (tmetric_region_stop() != 0)
		return fail("stop");
	double faults = tmetric_region_value("page-faults");
	printf("touch: %d pages, %.0f page faults: %s\n", PAGES, faults,
	       faults >= PAGES ? "agrees" : "DISAGREES");
	munmap(memory, (size_t)PAGES * PAGE);

	volatile unsigned long x = 0;
	if (tmetric_region_start("spin") != 0)
		return fail("start");
	for (unsigned long i = 0; i < 50000000UL; i++)
		x += i;
	if (tmetric_region_stop() != 0)
		return fail("stop");
	printf("spin: task-clock %.3f msec\n", tmetric_region_value("task-clock"));

	/* Errors are reported, not crashed on. */
	if (tmetric_region_stop() == 0 || strstr(tmetric_region_error(), "without a started") == NULL)
		return fail("double stop should fail");

	tmetric_region_report();
	tmetric_region_finish();
	return faults >= PAGES ? 0 : 1;
}
