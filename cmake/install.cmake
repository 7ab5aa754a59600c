# Installation (`cmake --install build [--prefix P]`) and the Debian package
# (`cpack -G DEB` in the build folder). Layout (GNU dirs):
#   bin/docpipe
#   share/man/man1/docpipe.1                      made by docpipe help --man
#   share/bash-completion/completions/docpipe     made by docpipe help --completion bash
#   share/zsh/vendor-completions/_docpipe         made by docpipe help --completion zsh
#   share/doc/docpipe/                            README.md, LICENSE, NOTICE, docs/*.md, and
#                                                 examples/ (jobs, documents, cluster files,
#                                                 try-installed.sh)
include(GNUInstallDirs)

install(TARGETS docpipe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(NOT CMAKE_CROSSCOMPILING)
    set(dp_gen ${CMAKE_BINARY_DIR}/share)
    add_custom_command(OUTPUT ${dp_gen}/docpipe.1 ${dp_gen}/docpipe.bash ${dp_gen}/_docpipe
        COMMAND ${CMAKE_COMMAND} -E make_directory ${dp_gen}
        COMMAND ${CMAKE_COMMAND} -DDOCPIPE=$<TARGET_FILE:docpipe> -DOUTDIR=${dp_gen}
                -P ${PROJECT_SOURCE_DIR}/cmake/gen_docs.cmake
        DEPENDS docpipe ${PROJECT_SOURCE_DIR}/cmake/gen_docs.cmake VERBATIM)
    add_custom_target(dp_manual ALL DEPENDS ${dp_gen}/docpipe.1 ${dp_gen}/docpipe.bash ${dp_gen}/_docpipe)
    install(FILES ${dp_gen}/docpipe.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
    install(FILES ${dp_gen}/docpipe.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
            RENAME docpipe)
    install(FILES ${dp_gen}/_docpipe DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
endif()

install(FILES README.md LICENSE NOTICE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md")
install(DIRECTORY examples/jobs examples/docs examples/code examples/corpus examples/cluster
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        PATTERN "out" EXCLUDE PATTERN "state" EXCLUDE)
install(PROGRAMS examples/try-installed.sh DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

set(CPACK_PACKAGE_NAME docpipe)
set(CPACK_PACKAGE_VENDOR "docpipe")
set(CPACK_PACKAGE_CONTACT "docpipe maintainers <docpipe@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "batch document processing with local Qwen language models")
set(CPACK_PACKAGE_DESCRIPTION "Runs local Qwen GGUF models (Qwen3.5, Qwen3, Qwen2.5) over folders of documents: \
token-aware chunking, continuous batching on CPU and CUDA, exactly-once JSONL output with resumable runs.")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)     # Depends: from the libraries the binary links
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bash-completion, poppler-utils")  # pdftotext reads .pdf
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)    # docpipe_VERSION_ARCH.deb
set(CPACK_GENERATOR DEB)
include(CPack)
