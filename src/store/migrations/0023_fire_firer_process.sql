-- The process carrying out a fire (pid and start time, as runs keep their
-- shepherd's): a fire left `firing` by a firer that died (killed, the
-- machine's power) is settled by the next look at the schedules, rather
-- than shown running for ever.
ALTER TABLE fires ADD COLUMN firer_pid INTEGER;
ALTER TABLE fires ADD COLUMN firer_start INTEGER;
