/*
 * Fuzz target: the decoders of stored values, as they would meet damaged
 * ones.  The first byte picks one: a document record (docrec_decode, K
 * from the second byte), a text (text_decode), a Redis value
 * (rval_decode), or a band run (l1_get and run_find on the rest as a run
 * of L1E_SIZE entries, the key from its first 8 bytes; run_get on l0's
 * 16-byte entries).
 */

#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "mhfilter.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint32_t	 sig[256];
	struct docinfo	 d;
	struct buf	 out = { 0 };
	struct u64vec	 found = { 0 };
	struct bentry	 e;
	uint64_t	 key = 0, group;
	size_t		 i, n;
	unsigned	 k;
	int		 state;

	if (size < 2)
		return (0);
	k = data[1] ? data[1] : 1;
	switch (data[0] % 5) {
	case 0:
		docrec_decode(data + 2, size - 2, k, sig, &d);
		break;
	case 1:
		text_decode(data + 2, size - 2, &out);
		break;
	case 2:
		rval_decode((const char *)data + 2, size - 2, k, sig, &d,
		    &state, &group);
		break;
	case 3:
		for (i = 0; i < 8 && i + 2 < size; i++)
			key = key << 8 | data[2 + i];
		data += 2 + i;
		n = (size - 2 - i) / L1E_SIZE;
		for (i = 0; i < n; i++)
			l1_get(data, i, band_chunk(key), &e);
		run_find(data, n, key, &found, 1024);
		break;
	default:
		n = (size - 2) / BENTRY_SIZE;
		for (i = 0; i < n; i++)
			run_get(data + 2, i, &e);
		break;
	}
	buf_free(&out);
	u64vec_free(&found);
	return (0);
}
