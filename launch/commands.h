/* The staticpipe subcommands. Each takes the arguments after the subcommand
 * name (argv[0] is the subcommand) and returns the process exit code:
 * 0 success, 1 runtime failure, 2 bad usage or bad input. */
#ifndef SP_COMMANDS_H
#define SP_COMMANDS_H

int cmd_init(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_encode(int argc, char **argv);
/* encode --vae: images and videos to latents (cmd_encode_vae.c); cmd_encode
 * hands its arguments here when they name --vae. */
int cmd_encode_vae(int argc, char **argv);
int cmd_commcheck(int argc, char **argv);

#endif
