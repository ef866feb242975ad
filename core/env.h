/* core/env.h: a switch of two words read from the environment (core/env.c).
 *
 * pt_env_switch(name, word0, word1): 0 when the variable is unset, empty or word0 (the
 * default), 1 when it is word1; any other value ends the job with one line naming the variable
 * and both words (exit 2, pt_fail_input). Reads the environment on every call: callers that ask often keep the answer.
 */
#ifndef PT_CORE_ENV_H
#define PT_CORE_ENV_H

int pt_env_switch(const char *name, const char *word0, const char *word1);

#endif
