@echo off
rem quickstart.bat - the quick start on Windows from cmd.exe: makes the random-weight test model,
rem runs the nightly-summary example job over examples\docs and shows its status.
rem
rem   examples\windows\quickstart.bat [path\to\docpipe.exe]
rem
rem The model is random, so the summaries are meaningless text: point model.path in the job at
rem your Qwen3.5-4B GGUF file (for example C:\models\Qwen3.5-4B-Q4_K_M.gguf) for real ones.
setlocal
cd /d "%~dp0..\.."
rem docpipe writes UTF-8: make the console show it
chcp 65001 >nul
set "DOCPIPE=%~1"
if "%DOCPIPE%"=="" set "DOCPIPE=build\docpipe.exe"
if not exist "%DOCPIPE%" (echo no %DOCPIPE%: build docpipe.exe first ^(README.md, Windows^) & exit /b 1)
if not exist examples\models mkdir examples\models
if not exist examples\models\tiny-qwen35-q4_k_m.gguf (
    "%DOCPIPE%" make-test-model --arch qwen35 --hidden 256 --ffn 768 --layers 8 --head-dim 64 --ssm-dim 64 --out examples\models\tiny-qwen35-f16.gguf || exit /b
    "%DOCPIPE%" quantize examples\models\tiny-qwen35-f16.gguf examples\models\tiny-qwen35-q4_k_m.gguf q4_k_m --quiet || exit /b
)
set JOB=examples\jobs\nightly-summary.yaml
echo --- docpipe validate %JOB%
"%DOCPIPE%" validate %JOB% || exit /b
echo --- docpipe run %JOB%   (random weights: the text is meaningless by design)
"%DOCPIPE%" run %JOB%
rem 0 = all done, 3 = some documents failed (errors.jsonl), 75 = stopped or locked: run again to resume
if errorlevel 4 exit /b %ERRORLEVEL%
if errorlevel 1 if not errorlevel 3 exit /b %ERRORLEVEL%
echo --- docpipe status %JOB%   (run it again: unchanged documents are skipped)
"%DOCPIPE%" status %JOB%
