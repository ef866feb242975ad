/* core/file.h: opening an input file that cannot block or stream without end (core/file.c).
 *
 * pt_open_regular_file(path, &why): a read-only descriptor of path when it is a regular file
 * (following symlinks); else -1 with why: the reason (strerror, or "it is a FIFO, not a regular
 * file" and the like). The open itself never blocks: a FIFO with no writer, a device, a
 * directory are refused after an O_NONBLOCK open and fstat, before any read. The descriptor is
 * blocking again when returned; the caller closes it. */
#ifndef PT_CORE_FILE_H
#define PT_CORE_FILE_H

int pt_open_regular_file(const char *path, const char **why);

#endif
