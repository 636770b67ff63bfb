/*
 * fuzz.h — what every libFuzzer target here shares. Built with -Dfuzz the
 * entry point is LLVMFuzzerTestOneInput; the unit tests build each target
 * with FUZZ_ENTRY renamed to replay the corpus.
 */
#ifndef TC_FUZZ_H
#define TC_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const uint8_t *data, size_t size);

/* A property that must hold: a crash libFuzzer reports with its input. */
static inline void must(bool ok)
{
	if (!ok)
		abort();
}

#endif
