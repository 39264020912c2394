/* openapi.c — docs/openapi.json, put in .rodata by the assembler at build
 * time, so an installed brig serves /v1/openapi.json with no file to find
 * (CMakeLists.txt rebuilds this file when the document changes). */
#include <stddef.h>

#include "serve/internal.h"

__asm__(".section .rodata.brig_openapi,\"a\",@progbits\n"
	".globl brig__openapi_start\n"
	".hidden brig__openapi_start\n"
	"brig__openapi_start:\n"
	".incbin \"" BRIG_SOURCE_DIR "/docs/openapi.json\"\n"
	".globl brig__openapi_end\n"
	".hidden brig__openapi_end\n"
	"brig__openapi_end:\n"
	".previous\n");
extern const char brig__openapi_start[] __attribute__((visibility("hidden")));
extern const char brig__openapi_end[] __attribute__((visibility("hidden")));

void serve__openapi(const char **data, size_t *len)
{
	*data = brig__openapi_start;
	*len = (size_t)(brig__openapi_end - brig__openapi_start);
}
