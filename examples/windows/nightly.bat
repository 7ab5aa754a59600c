@echo off
rem nightly.bat - what the Task Scheduler starts every night (docs/operations.md, "Windows Task
rem Scheduler"). Edit the two paths. The exit code is docpipe's: 0 done, 3 some documents failed,
rem 75 stopped or locked (the next start resumes), anything else needs a look.
setlocal
set "DOCPIPE=C:\Program Files\docpipe\docpipe.exe"
set "JOB=C:\jobs\nightly.yaml"
"%DOCPIPE%" --log-format json run "%JOB%" 2>> "%~dp0nightly-log.jsonl"
exit /b %ERRORLEVEL%
