/* Callgrind's client requests, callable from Python through ctypes (harness.measure.instructions).
 * The requests are macros that expand to a magic instruction sequence valgrind recognises and a
 * native CPU executes as a no-op, so they can only be issued from compiled code. */
#include <valgrind/callgrind.h>

/* Count from here: zero the counters, then instrument (the process ran uninstrumented so far). */
void adh_start_counting(void) {
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
}

/* Stop counting and write the counts since adh_start_counting to the output file + ".1". */
void adh_stop_counting(void) {
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("adh-steps");
}

/* Nonzero when this process runs under valgrind. */
int adh_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
