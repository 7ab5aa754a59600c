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
if not exist "%DOCPIPE%" goto :nobinary
if not exist examples\models mkdir examples\models
if exist examples\models\tiny-qwen35-q4_k_m.gguf goto :run
"%DOCPIPE%" make-test-model --arch qwen35 --hidden 256 --ffn 768 --layers 8 --head-dim 64 --ssm-dim 64 --out examples\models\tiny-qwen35-f16.gguf
if errorlevel 1 exit /b %ERRORLEVEL%
"%DOCPIPE%" quantize examples\models\tiny-qwen35-f16.gguf examples\models\tiny-qwen35-q4_k_m.gguf q4_k_m --quiet
if errorlevel 1 exit /b %ERRORLEVEL%
:run
set "JOB=examples\jobs\nightly-summary.yaml"
echo --- docpipe validate %JOB%
"%DOCPIPE%" validate %JOB%
if errorlevel 1 exit /b %ERRORLEVEL%
echo --- docpipe run %JOB%   (random weights: the text is meaningless by design)
"%DOCPIPE%" run %JOB%
rem 0 = all done, 3 = some documents failed (errors.jsonl), 75 = stopped or locked: run again to resume
set RC=%ERRORLEVEL%
if not "%RC%"=="0" if not "%RC%"=="3" exit /b %RC%
echo --- docpipe status %JOB%   (run it again: unchanged documents are skipped)
"%DOCPIPE%" status %JOB%
exit /b %ERRORLEVEL%
:nobinary
echo no %DOCPIPE%: build docpipe.exe first (README.md, Windows)
exit /b 1
