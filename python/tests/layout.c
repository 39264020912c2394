/* layout.c — prints the size and field offsets of every libbrig struct the
 * Python package mirrors with ctypes (python/brig/_lib.py), one
 * "struct field offset" line each and "struct sizeof N"; test_layout.py
 * compares them with the mirrors, so a header change fails the tests. */
#include <stddef.h>
#include <stdio.h>

#include <brig/brig.h>

#define S(t) printf(#t " sizeof %zu\n", sizeof(t))
#define F(t, f) printf(#t " " #f " %zu\n", offsetof(t, f))

int main(void)
{
	S(brig_spec);
	S(brig_error);
	F(brig_error, code);
	F(brig_error, sys_errno);
	F(brig_error, http_status);
	F(brig_error, message);
	S(brig_identity);
	F(brig_identity, ns);
	F(brig_identity, agent);
	F(brig_identity, session);
	F(brig_identity, generation);
	S(brig_up_opts);
	F(brig_up_opts, version);
	F(brig_up_opts, fresh);
	F(brig_up_opts, checkpoint_dir);
	S(brig_up_result);
	F(brig_up_result, computer);
	F(brig_up_result, lost);
	F(brig_up_result, old_generation);
	F(brig_up_result, checkpoint_id);
	F(brig_up_result, checkpoint_created_ms);
	F(brig_up_result, recorded);
	S(brig_recover_result);
	F(brig_recover_result, computer);
	F(brig_recover_result, old_generation);
	F(brig_recover_result, new_generation);
	F(brig_recover_result, checkpoint_id);
	F(brig_recover_result, won);
	S(brig_store_checkpoint);
	F(brig_store_checkpoint, id);
	F(brig_store_checkpoint, ns);
	F(brig_store_checkpoint, agent);
	F(brig_store_checkpoint, session);
	F(brig_store_checkpoint, generation);
	F(brig_store_checkpoint, digest);
	F(brig_store_checkpoint, blob);
	F(brig_store_checkpoint, bytes_raw);
	F(brig_store_checkpoint, bytes_stored);
	F(brig_store_checkpoint, created_ms);
	F(brig_store_checkpoint, blob_refs);
	F(brig_store_checkpoint, count);
	S(brig_store_audit);
	F(brig_store_audit, id);
	F(brig_store_audit, ns);
	F(brig_store_audit, agent);
	F(brig_store_audit, session);
	F(brig_store_audit, generation);
	F(brig_store_audit, container_name);
	F(brig_store_audit, argv_json);
	F(brig_store_audit, exit_code);
	F(brig_store_audit, timed_out);
	F(brig_store_audit, outcome);
	F(brig_store_audit, duration_ms);
	F(brig_store_audit, stdout_bytes);
	F(brig_store_audit, stderr_bytes);
	F(brig_store_audit, created_ms);
	F(brig_store_audit, actor);
	S(brig_guest_exec_opts);
	F(brig_guest_exec_opts, version);
	F(brig_guest_exec_opts, argv);
	F(brig_guest_exec_opts, env);
	F(brig_guest_exec_opts, env_count);
	F(brig_guest_exec_opts, cwd);
	F(brig_guest_exec_opts, stdin_fd);
	F(brig_guest_exec_opts, stdin_data);
	F(brig_guest_exec_opts, stdin_len);
	F(brig_guest_exec_opts, deadline_ms);
	F(brig_guest_exec_opts, cancel_fd);
	F(brig_guest_exec_opts, on_output);
	F(brig_guest_exec_opts, payload);
	F(brig_guest_exec_opts, detached);
	F(brig_guest_exec_opts, keep);
	F(brig_guest_exec_opts, tag);
	F(brig_guest_exec_opts, rows);
	F(brig_guest_exec_opts, cols);
	F(brig_guest_exec_opts, resize_fd);
	F(brig_guest_exec_opts, size_cb);
	F(brig_guest_exec_opts, size_payload);
	S(brig_guest_exit);
	F(brig_guest_exit, code);
	F(brig_guest_exit, signal);
	F(brig_guest_exit, timed_out);
	F(brig_guest_exit, canceled);
	F(brig_guest_exit, killed);
	F(brig_guest_exit, proc);
	F(brig_guest_exit, dropped);
	S(brig_capture);
	F(brig_capture, data);
	F(brig_capture, len);
	F(brig_capture, total);
	F(brig_capture, dropped);
	S(brig_exec_result);
	F(brig_exec_result, exit_code);
	F(brig_exec_result, timed_out);
	F(brig_exec_result, canceled);
	F(brig_exec_result, uncertain);
	F(brig_exec_result, container_stopped);
	F(brig_exec_result, duration_ms);
	F(brig_exec_result, out);
	F(brig_exec_result, err);
	F(brig_exec_result, stop_checkpoint_id);
	F(brig_exec_result, stop_checkpoint_failed);
	S(brig_run_opts);
	F(brig_run_opts, version);
	F(brig_run_opts, spec);
	F(brig_run_opts, argv);
	F(brig_run_opts, inputs);
	F(brig_run_opts, input_count);
	F(brig_run_opts, out_dir);
	F(brig_run_opts, out_mb);
	F(brig_run_opts, workdir);
	F(brig_run_opts, timeout_s);
	F(brig_run_opts, stdin_fd);
	F(brig_run_opts, cancel_fd);
	F(brig_run_opts, on_output);
	F(brig_run_opts, payload);
	F(brig_run_opts, capture_max);
	S(brig_run_result);
	F(brig_run_result, exec);
	F(brig_run_result, image_id);
	F(brig_run_result, container);
	F(brig_run_result, create_ms);
	F(brig_run_result, copy_in_ms);
	F(brig_run_result, run_ms);
	F(brig_run_result, copy_out_ms);
	F(brig_run_result, total_ms);
	F(brig_run_result, outputs);
	F(brig_run_result, output_count);
	F(brig_run_result, output_bytes);
	F(brig_run_result, oom_killed);
	S(brig_checkpoint_opts);
	F(brig_checkpoint_opts, version);
	F(brig_checkpoint_opts, dir);
	F(brig_checkpoint_opts, keep);
	F(brig_checkpoint_opts, zstd_level);
	S(json_t);
	F(json_t, type);
	F(json_t, refcount);
	printf("version up_opts %d\n", BRIG_UP_OPTS_VERSION);
	printf("version guest_exec_opts %d\n", BRIG_GUEST_EXEC_OPTS_VERSION);
	printf("version run_opts %d\n", BRIG_RUN_OPTS_VERSION);
	printf("version checkpoint_opts %d\n", BRIG_CHECKPOINT_OPTS_VERSION);
	return 0;
}
