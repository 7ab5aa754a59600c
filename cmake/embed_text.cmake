# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_text.cmake
# Writes `const char NAME[] = {bytes..., 0};` so a document (docs/cli.md for `docpipe help`)
# travels inside the binary and help and docs cannot drift apart.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed_text.cmake; do not edit */\nconst char ${NAME}[] = {\n${bytes}0};\n")
