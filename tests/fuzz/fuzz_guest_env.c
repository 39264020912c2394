/* fuzz_guest_env.c — libFuzzer target for how brig-init reads the env file
 * the sandbox can also write (guest/proto.c): lines split in place, each
 * entry put over the container's environment. Checks that every entry kept
 * is KEY=… with a non-empty key, no key twice, and nothing past the room. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char home[] = "HOME=/runtime", path[] = "PATH=/usr/bin:/bin";
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	size_t n = brig_gp_env_lines(buf, size);
	if (n < 1 || n > size + 1)
		abort();
	char **env = calloc(n + 3, sizeof *env);
	if (!env)
		abort();
	size_t k = 0;
	brig_gp_env_put(env, &k, home);
	brig_gp_env_put(env, &k, path);
	char *p = buf;
	for (size_t i = 0; i < n; i++) {
		if (p > buf + size)
			abort(); /* walked past the terminating NUL */
		brig_gp_env_put(env, &k, p);
		p += strlen(p) + 1;
	}
	if (k > n + 2)
		abort();
	for (size_t i = 0; i < k; i++) {
		char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			abort();
		size_t kl = (size_t)(eq - env[i]) + 1;
		for (size_t j = 0; j < i; j++)
			if (strncmp(env[j], env[i], kl) == 0)
				abort();
	}
	free(env);
	free(buf);
	return 0;
}
