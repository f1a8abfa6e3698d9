#!/usr/bin/env bash
# meson install into a temporary DESTDIR, then build bindings/c/example.c
# against the installed tree with pkg-config alone and run it, with the
# README's own snippet ("Use it from C": its lines after `meson install`,
# PREFIX the installed tree's prefix, a folder outside the system paths):
# it must find libtessera.so through the rpath given at link time (the
# installed libdir) and the installed plugins (<libdir>/tessera) with no
# TESSERA_PLUGIN_PATH and no LD_LIBRARY_PATH. Its greedy answer must equal
# `tessera run`'s. tessera.pc hands out -I<includedir> alone as Cflags.
# Env: BUILD_ROOT, SOURCE_ROOT, TESSERA_BIN, EXTRA_CFLAGS (the sanitizers).
# Before the model: the public boundary (issue 33). The installed
# libtessera.so exports exactly the functions the installed headers declare,
# and cli/ (the tessera binary, the server included) compiles against the
# installed headers alone and links against the installed library.
set -euo pipefail
model="${TESSERA_MODEL_CACHE:-$HOME/.cache/tessera/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
command -v cc >/dev/null || { echo "skip: no C compiler"; exit 77; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }

dest=$(mktemp -d "$BUILD_ROOT/install-test.XXXXXX")
trap 'rm -rf "$dest"' EXIT
meson install -C "$BUILD_ROOT" --no-rebuild --destdir "$dest" --quiet >/dev/null

pc=$(find "$dest" -name tessera.pc | head -n1)
[ -n "$pc" ] || { echo "FAIL: no tessera.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libtessera.so.0 >/dev/null || { echo "FAIL: no libtessera.so.0 (soname) in $libdir"; exit 1; }
soname=$(objdump -p "$libdir/libtessera.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libtessera.so.0" ] || { echo "FAIL: soname is '$soname'"; exit 1; }
for h in tessera.h plugin.h plugin_util.h plugin_check.h plugin_quants.h iq_grids.h; do
  [ -f "$(dirname "$(dirname "$libdir")")/include/tessera/$h" ] ||
    [ -f "$(dirname "$libdir")/include/tessera/$h" ] || { echo "FAIL: tessera/$h not installed"; exit 1; }
done
ls "$libdir"/tessera/libtessera-backend-*.so >/dev/null || { echo "FAIL: no plugins in $libdir/tessera"; exit 1; }

# The tree as `meson setup --prefix PREFIX` would have installed it: the
# same files under $dest/<prefix>, and tessera.pc's prefix that folder (a
# relocatable tessera.pc, -Dpkgconfig.relocatable=true, already is).
configured_prefix=$(sed -n 's/^prefix=//p' "$pc")
case "$configured_prefix" in
  '${pcfiledir}'*) PREFIX=$(cd "$(dirname "$pc")/${configured_prefix#\$\{pcfiledir\}/}" && pwd) ;;
  *) PREFIX=$dest$configured_prefix
     sed -i "s|^prefix=.*|prefix=$PREFIX|" "$pc" ;;
esac
export PKG_CONFIG_PATH="$(dirname "$pc")"
unset PKG_CONFIG_SYSROOT_DIR
flags=$(pkg-config --cflags --libs tessera)
echo "pkg-config --cflags --libs tessera: $flags"

# An app's flags: the public include folder alone; what the engine is built
# with (utf8proc's -DUTF8PROC_EXPORTS, cJSON's include folder) stays private.
cflags=$(pkg-config --cflags tessera | xargs)
includedir=$(pkg-config --variable=includedir tessera)
[ "$cflags" = "-I$includedir" ] ||
  { echo "FAIL: pkg-config --cflags tessera is '$cflags', want '-I$includedir' alone"; exit 1; }
libs=$(pkg-config --libs tessera | xargs)
[ "$libs" = "-L$(pkg-config --variable=libdir tessera) -ltessera" ] ||
  { echo "FAIL: pkg-config --libs tessera is '$libs', want -L<libdir> -ltessera alone"; exit 1; }
static_libs=$(pkg-config --static --libs tessera)
for l in -lpcre2-8 -lutf8proc; do
  case " $static_libs " in
    *" $l "*) ;;
    *) echo "FAIL: pkg-config --static --libs tessera lacks $l: $static_libs"; exit 1 ;;
  esac
done
echo "ok: tessera.pc: Cflags '$cflags', Libs '$libs', the engine's own libraries only with --static"

# Exported symbols = the tessera_* functions the installed headers declare.
hdrdir=$(dirname "$(find "$dest" -path '*/include/tessera/tessera.h' | head -n1)")
exported=$(nm -D --defined-only "$libdir/libtessera.so" | awk '{print $3}' | sort)
# (the names read as the link map's are: core/export_map.py on the installed headers)
python3 "$SOURCE_ROOT/core/export_map.py" "$dest/public.map" "$hdrdir"/tessera*.h
declared=$(sed -n 's/^    \(tessera_[A-Za-z0-9_]*\);$/\1/p' "$dest/public.map" | sort)
if [ "$exported" != "$declared" ]; then
  echo "FAIL: libtessera.so exports differ from the public headers' functions (< exported, > declared):"
  diff <(echo "$exported") <(echo "$declared") | head -20
  exit 1
fi
echo "ok: libtessera.so exports the $(echo "$exported" | wc -l) functions the public headers declare, nothing else"

# cli/ against the installed tree alone: no core/src, no source root on the
# include path; the server's files when cJSON and libmicrohttpd are there.
cli_src=("$SOURCE_ROOT"/cli/*.c)
cli_flags=()
if pkg-config --exists libcjson; then
  cli_flags+=(-DTESSERA_HAVE_CJSON $(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --cflags --libs libcjson))
  if pkg-config --exists libmicrohttpd; then
    python3 "$SOURCE_ROOT/serve/embed.py" "$SOURCE_ROOT/serve/page.html" "$dest/serve_page_html.c" serve_page_html
    cli_src+=("$SOURCE_ROOT"/serve/*.c "$SOURCE_ROOT"/cli/router/*.c "$dest/serve_page_html.c")
    cli_flags+=(-DTESSERA_HAVE_SERVE -I"$SOURCE_ROOT/serve" $(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --cflags --libs libmicrohttpd))
  fi
fi
# shellcheck disable=SC2086
cc -std=c11 -D_GNU_SOURCE -O0 -Wall -Wextra -Werror ${EXTRA_CFLAGS:-} "${cli_src[@]}" "${cli_flags[@]}" $flags \
   -lm -lpthread -Wl,-rpath,"$libdir" -o "$dest/tessera-cli" ||
  { echo "FAIL: cli/ does not build against the installed public headers and library alone"; exit 1; }
"$dest/tessera-cli" --help >/dev/null || { echo "FAIL: the cli built against the installed tree does not run"; exit 1; }
echo "ok: cli/ ($(echo "${cli_src[@]}" | wc -w) files) builds against the installed headers and libtessera.so alone"

[ -f "$model" ] || { echo "skip: $model absent (scripts/fetch-models.sh); the boundary checks above passed"; exit 77; }
# The README's snippet, from the line after `meson install` on, run as it
# stands in a folder of its own (bindings/ the source tree's), the model
# path made this test's, the prompt and count its own, cc given -Werror
# (and the sanitizers of a -Dsanitize build).
snippet=$(awk '/^## Use it from C/ {c = 1} c && /^```sh$/ {b = 1; next} b && /^```$/ {exit} b' \
  "$SOURCE_ROOT/README.md" | sed '1,/meson install/d')
echo "$snippet" | grep -q -- '-Wl,-rpath' ||
  { echo "FAIL: README's C snippet lost its rpath:"; echo "$snippet"; exit 1; }
prompt="The capital of France is"
snippet=$(echo "$snippet" |
  sed -e "s|~/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf|\"\$MODEL\"|" \
      -e "s|\"The capital of France is\" 16|\"\$PROMPT\" 12|" \
      -e "s|^cc |cc -std=c11 -Wall -Wextra -Werror ${EXTRA_CFLAGS:-} |")
echo "$snippet" | grep -q '"$MODEL" "$PROMPT" 12' ||
  { echo "FAIL: README's C snippet no longer runs ./example MODEL PROMPT N:"; echo "$snippet"; exit 1; }
mkdir "$dest/app"
ln -s "$SOURCE_ROOT/bindings" "$dest/app/bindings"
# shellcheck disable=SC2016
if ! (cd "$dest/app" && env -u TESSERA_PLUGIN_PATH -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH \
      PREFIX="$PREFIX" MODEL="$model" PROMPT="$prompt" \
      bash -euo pipefail -c "$snippet" > "$dest/out" 2> "$dest/devices"); then
  echo "FAIL: README's C snippet against PREFIX=$PREFIX:"; echo "$snippet"; cat "$dest/devices"; exit 1
fi
out=$(cat "$dest/out")
cat "$dest/devices"
echo "$out"
grep -q "^device cpu-avx0 (CPU) from $libdir/tessera/libtessera-backend-cpu-avx.so$" "$dest/devices" ||
  { [ "$(uname -m)" != x86_64 ] || { echo "FAIL: cpu-avx0 not loaded from the installed plugin dir"; exit 1; }; }
want=$(env -u TESSERA_PLUGIN_PATH "$TESSERA_BIN" run -m "$model" -p "$prompt" -n 12 --temp 0 2>/dev/null)
got="$prompt$out"
[ "$got" = "$want" ] || { echo "FAIL: installed example says '$got', tessera run '$want'"; exit 1; }
echo "ok: installed tree, pkg-config, rpath and installed plugins; greedy text equals tessera run's"

# Java, where the JDK was found at build time: bindings/java/examples/Example.java
# against the installed jar, java.library.path the installed libdir, nothing else.
jar=$(find "$dest" -name tessera-java.jar | head -n1)
if [ -n "$jar" ] && command -v javac >/dev/null && command -v java >/dev/null; then
  mkdir "$dest/java"
  javac -cp "$jar" -d "$dest/java" "$SOURCE_ROOT/bindings/java/examples/Example.java"
  [ -z "${EXTRA_CFLAGS:-}" ] || { echo "ok (the Java example is left out under the sanitizers)"; exit 0; }
  jout=$(env -u TESSERA_PLUGIN_PATH -u LD_LIBRARY_PATH java -cp "$jar:$dest/java" -Djava.library.path="$libdir" \
         Example "$model")
  echo "$jout"
  echo "$jout" | grep -q '^json: {' || { echo "FAIL: the Java example gave no JSON answer"; exit 1; }
  echo "ok: Java example against the installed jar and libtessera_jni.so"
fi
