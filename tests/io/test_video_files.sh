#!/usr/bin/env bash
# The files ranks/io/video_out.h writes, checked with tools that share no
# code with it (check_video.py): MP4/MKV/MOV/WebM by ffprobe (codec, size,
# fps, frame count and times) and decoded back by the ffmpeg binary (mean
# error within what 4:2:0 costs plus a codec allowance); PNG frames by a
# PNG reader written from the specification (exact levels); .h5 by h5py
# (exact). Then FFmpeg made unavailable through SP_FFMPEG_LIBDIR (an empty
# folder): the check fails with one line naming the library and what to
# install, while .h5 and PNG frames are still written; and SP_FFMPEG_LIBDIR
# pointing at a folder that holds the libraries makes them load.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
for tool in ffmpeg ffprobe; do
  command -v $tool >/dev/null 2>&1 || sp_skip "$tool not found (launch/deps.sh installs ffmpeg)"
done
sp_helper DRV io_video_write
CHK=$SP_SRC/tests/io/check_video.py
status=$("$DRV" --status)
echo "ffmpeg: $status"
case $status in
  libavformat*) ;;
  *) sp_skip "FFmpeg's libraries do not load here: $status" ;;
esac
sp_work_dir io-video-files
T=$work
run_py() { "$PY" "$CHK" "$@" || fail=1; }

seed=${SP_SEED:-$(( $(date +%s%N) % 1000000007 ))}
echo "seed $seed (replay with SP_SEED=$seed)"
# 9 frames (1 + 4 * 2, as the decoder makes them) of 72x40: even, not a
# multiple of 16; 3 frames of 33x17 for the kinds that take odd sizes.
"$PY" "$CHK" gen "$T/in.h5" 9 40 72 "$seed" || exit 1
"$PY" "$CHK" gen "$T/odd.h5" 3 17 33 "$((seed + 1))" || exit 1

# The codecs this FFmpeg should pick (video_out.h): H.264 by libx264, else
# the container's default (MPEG-4 part 2); VP9, else VP8.
encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null)
h264=mpeg4; grep -q ' libx264 ' <<<"$encoders" && h264=h264
vpx=vp8; grep -q ' libvpx-vp9 ' <<<"$encoders" && vpx=vp9
outs=("$T/v.mp4" "$T/v.mkv" "$T/v.mov" "$T/v.h5" "$T/frames/")
webm=0
if "$DRV" --check "$T/v.webm" 72 40 16 2>"$T/webm.err"; then
  outs+=("$T/v.webm")
  webm=1
else
  echo "skip v.webm: $(cat "$T/webm.err")"
fi

# Codec allowance over 4:2:0: 1 level of mean absolute error. crf 18
# (x264) and crf 24 (VP9) cost about 0.3 levels on this pattern; a frame
# out of place costs several, which the check shows every run.
"$DRV" "$T/in.h5" 16 "${outs[@]}" || bad "writing ${outs[*]}"
"$DRV" "$T/in.h5" 24 "$T/v24.mov" || bad "writing v24.mov"
"$DRV" "$T/odd.h5" 16 "$T/odd_out.h5" "$T/oddframes/" || bad "writing odd sizes"
for c in mp4 mkv mov; do run_py video "$T/v.$c" "$T/in.h5" 16 $h264 1; done
[ $webm -eq 1 ] && run_py video "$T/v.webm" "$T/in.h5" 16 $vpx 1
run_py video "$T/v24.mov" "$T/in.h5" 24 $h264 1
run_py png "$T/frames" "$T/in.h5"
run_py h5 "$T/v.h5" "$T/in.h5" 16
run_py png "$T/oddframes" "$T/odd.h5"
run_py h5 "$T/odd_out.h5" "$T/odd.h5" 16
left=$(ls -A "$T" | grep '\.tmp-' || true)
[ -z "$left" ] && ok "no temporary left behind" || bad "temporaries left: $left"

# FFmpeg unavailable: an empty SP_FFMPEG_LIBDIR.
mkdir "$T/empty" "$T/nf"
SP_FFMPEG_LIBDIR=$T/empty "$DRV" --check "$T/nf/x.mp4" 72 40 16 2>"$T/err"
rc=$?
lines=$(wc -l <"$T/err")
if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q 'cannot load libavutil\.so\.[0-9]' "$T/err" &&
   grep -q "SP_FFMPEG_LIBDIR=$T/empty" "$T/err" && grep -q 'install libavformat[0-9]' "$T/err"; then
  ok "missing FFmpeg: exit 2, one line: $(cat "$T/err")"
else
  bad "missing FFmpeg: exit $rc, $lines lines: $(cat "$T/err")"
fi
SP_FFMPEG_LIBDIR=$T/empty "$DRV" "$T/in.h5" 16 "$T/nf/x.mp4" 2>/dev/null
rc=$?
[ $rc -eq 2 ] && [ -z "$(ls -A "$T/nf")" ] && ok "missing FFmpeg: writing .mp4 fails with exit 2, nothing written" ||
  bad "missing FFmpeg: writing .mp4 exit $rc, left: $(ls -A "$T/nf")"
if SP_FFMPEG_LIBDIR=$T/empty "$DRV" "$T/in.h5" 16 "$T/nf/v.h5" "$T/nf/frames/"; then
  ok "missing FFmpeg: .h5 and PNG frames still written"
  run_py h5 "$T/nf/v.h5" "$T/in.h5" 16
  run_py png "$T/nf/frames" "$T/in.h5"
else
  bad "missing FFmpeg: .h5 and PNG frames failed"
fi

# SP_FFMPEG_LIBDIR naming a folder that holds the libraries: they load from there.
mkdir "$T/ff"
for lib in avutil swscale avcodec avformat; do
  so=$(ldconfig -p | awk -v l="lib$lib.so." 'index($1, l) == 1 { print $NF; exit }')
  [ -n "$so" ] && ln -s "$so" "$T/ff/$(basename "$so")"
done
SP_FFMPEG_LIBDIR=$T/ff "$DRV" --check "$T/nf/y.mp4" 72 40 16 &&
  st=$(SP_FFMPEG_LIBDIR=$T/ff "$DRV" --status) && [ "${st#libavformat}" != "$st" ] &&
  ok "SP_FFMPEG_LIBDIR=$T/ff ($(ls "$T/ff" | tr '\n' ' ')): FFmpeg loads from there" ||
  bad "SP_FFMPEG_LIBDIR=$T/ff: FFmpeg did not load from there"

[ $fail -eq 0 ] && echo "io/video_files: all checks passed" || echo "seed $seed (replay with SP_SEED=$seed)"
exit $fail
