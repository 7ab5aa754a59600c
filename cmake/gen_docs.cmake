# cmake -DDOCPIPE=path/to/docpipe -DOUTDIR=dir -P gen_docs.cmake
# The manual page and the shell completions, made by the built binary from the same text as
# its help (docs/cli.md, embedded), so the three cannot disagree.
execute_process(COMMAND "${DOCPIPE}" help --man OUTPUT_FILE "${OUTDIR}/docpipe.1" RESULT_VARIABLE rc1)
execute_process(COMMAND "${DOCPIPE}" help --completion bash OUTPUT_FILE "${OUTDIR}/docpipe.bash" RESULT_VARIABLE rc2)
execute_process(COMMAND "${DOCPIPE}" help --completion zsh OUTPUT_FILE "${OUTDIR}/_docpipe" RESULT_VARIABLE rc3)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT rc3 EQUAL 0)
    message(FATAL_ERROR "docpipe help --man / --completion failed (${rc1} ${rc2} ${rc3})")
endif()
