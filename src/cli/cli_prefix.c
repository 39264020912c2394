/* cli_prefix.c — a computer named by a unique prefix of its name, as Docker
 * takes id prefixes. Looked up only after the exact name was not found, so
 * naming a computer in full costs no extra Engine call. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "cli/cli.h"
#include "util/util.h"

/* Names shown when a prefix is ambiguous; the count says how many more. */
#define PREFIX_SHOW 5

/* Names come from the daemon: one that would write control characters to
 * the terminal is not offered. */
static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int cli_name_prefix(brig_engine *e, const char *prefix, char **out)
{
	*out = NULL;
	if (!prefix || !*prefix)
		return 1;
	brig_computer **cs = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	if (brig_computer_list(e, &cs, &n, NULL, NULL, &err) != 0) {
		brig_error_free(err); /* the caller reports the name as not found */
		return 1;
	}
	size_t len = strlen(prefix), hits = 0;
	brig_buf names;
	brig_buf_init(&names, 4096);
	const char *one = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *name = cs[i]->name;
		if (!name || strncmp(name, prefix, len) != 0 || strcmp(name, prefix) == 0 || !printable(name))
			continue;
		if (hits < PREFIX_SHOW)
			brig_buf_putf(&names, "%s%s", hits ? ", " : "", name);
		one = name;
		hits++;
	}
	int rc = 1;
	if (hits == 1) {
		*out = xstrdup(one);
		rc = 0;
	} else if (hits > 1) {
		cli_fail("%s is a prefix of %zu computers (%s%s): give more of the name; nothing was done", prefix,
			 hits, brig_buf_cstr(&names), hits > PREFIX_SHOW ? ", …" : "");
		rc = CLI_EXIT_FAIL;
	}
	brig_buf_free(&names);
	brig_computer_free_array(cs, n);
	return rc;
}

int cli_prefix_again(brig_engine *e, int rc, bool prefix, char **ref, brig_error **err)
{
	if (rc != BRIG_ENOTFOUND || !prefix)
		return 0;
	char *full = NULL;
	int p = cli_name_prefix(e, *ref, &full);
	if (p != 0 && p != CLI_EXIT_FAIL)
		return 0;
	brig_error_free(*err);
	*err = NULL;
	if (p == CLI_EXIT_FAIL)
		return p;
	free(*ref);
	*ref = full;
	return 1;
}

int cli_computer_get(brig_engine *e, brig_computer **out, char **ref, bool prefix)
{
	brig_error *err = NULL;
	int g = brig_computer_get(e, out, *ref, NULL, &err);
	int p = cli_prefix_again(e, g, prefix, ref, &err);
	if (p == CLI_EXIT_FAIL)
		return p;
	if (p == 1)
		g = brig_computer_get(e, out, *ref, NULL, &err);
	return g ? cli_error(err, NULL) : 0;
}

int cli_computer_guest(brig_engine **e, brig_guest **out, char **ref, bool prefix)
{
	if (cli_engine_open(e) != 0)
		return CLI_EXIT_FAIL;
	brig_error *err = NULL;
	int g = brig_computer_guest(*e, out, *ref, &err);
	int p = cli_prefix_again(*e, g, prefix, ref, &err);
	if (p == CLI_EXIT_FAIL)
		return p;
	if (p == 1)
		g = brig_computer_guest(*e, out, *ref, &err);
	return g ? cli_error(err, NULL) : 0;
}
