/*
 * Fuzz target: one message (mail_extract), with the MAIL_* flags of the
 * first byte (quote, signature and footer stripping; no id); its text and
 * the raw bytes as the attachments' reader (mail_attach_within) meets
 * them, each way.
 */

#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "mhfilter.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf	 text = { 0 }, id = { 0 };
	int64_t		 t;
	char		*cause = NULL;
	int		 flags;

	if (size < 1)
		return (0);
	flags = (data[0] & MAIL_STRIP_ALL) | (data[0] & 0x80 ? MAIL_NO_ID : 0);
	if (mail_init(NULL) != 0)
		abort();	/* (mail.c is linked in) */
	if (mail_extract((const char *)data + 1, size - 1, flags, &text, &id,
	    &t, &cause) != 0)
		free(cause);
	if (mail_attach_within(text.data, text.len, (const char *)data + 1,
	    size - 1) != 1 && text.len == 0)
		abort();	/* nothing attached is within anything */
	(void)mail_attach_within((const char *)data + 1, size - 1, text.data,
	    text.len);
	buf_free(&text);
	buf_free(&id);
	return (0);
}
