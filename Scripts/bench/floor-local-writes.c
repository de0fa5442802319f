/*
 * The floor of local-writes-sqlite with the look-ups a queued write needs: the raw baseline's
 * inserts (a record row and a queue row per write, 1,000 writes per transaction, WAL and
 * synchronous = FULL) with or without, before each write, the two reads OfflineSync makes
 * (the item by id, and the item's newest queued operation through the queue's index).
 *
 *   offline-sync-harness bench-worker --workload local-writes-sqlite --mode raw \
 *       --records 1000 --batch 1000 --directory DIR      # an empty store's schema, in DIR
 *   cc -O2 -o floor Scripts/bench/floor-local-writes.c -lsqlite3
 *   cp DIR/bench.sqlite f.sqlite && ./floor f.sqlite 0   # inserts only
 *   cp DIR/bench.sqlite f.sqlite && ./floor f.sqlite 1   # with the two reads per write
 *
 * README, issue 36's fifteenth step: the reads add 6-9% to the raw side's time.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
#define CK(x) do{int rc=(x); if(rc!=SQLITE_OK&&rc!=SQLITE_DONE&&rc!=SQLITE_ROW){fprintf(stderr,"%s: %s\n",#x,sqlite3_errmsg(db));exit(1);}}while(0)
int main(int argc,char**argv){
  if(argc!=3){fprintf(stderr,"usage: %s STORE.sqlite 0|1 (1: with the two reads per write)\n",argv[0]);return 2;}
  int reads=atoi(argv[2]); sqlite3*db; CK(sqlite3_open(argv[1],&db));
  sqlite3_exec(db,"PRAGMA journal_mode=WAL",0,0,0); sqlite3_exec(db,"PRAGMA synchronous=FULL",0,0,0);
  sqlite3_exec(db,"DELETE FROM items; DELETE FROM __operations;",0,0,0);
  sqlite3_stmt *item,*op,*getItem,*latest;
  CK(sqlite3_prepare_v2(db,"INSERT INTO items (id,version,updatedAt,deleted,extra,f_title,f_n,f_done,f_note) VALUES (?1,NULL,NULL,0,NULL,?2,?3,?4,?5)",-1,&item,0));
  CK(sqlite3_prepare_v2(db,"INSERT INTO __operations (id,version,updatedAt,deleted,extra,f_sequence,f_table,f_itemId,f_kind,f_item,f_baseVersion,f_state,f_attempts,f_createdAt,f_changedAt,f_transaction,f_sendId,f_changedFields) VALUES (?1,NULL,NULL,0,NULL,?2,'items',?3,'insert',?4,NULL,'pending',0,?5,?5,?6,?1,?7)",-1,&op,0));
  CK(sqlite3_prepare_v2(db,"SELECT id,version,updatedAt,deleted,extra,f_title,f_n,f_done,f_note,sum FROM items WHERE id=?1",-1,&getItem,0));
  CK(sqlite3_prepare_v2(db,"SELECT id,version,updatedAt,deleted,extra,f_sequence,f_table,f_itemId,f_kind,f_item,f_baseVersion,f_state,f_attempts,f_createdAt,f_changedAt,f_transaction,f_sendId,f_changedFields,sum FROM __operations WHERE f_itemId=?1 AND f_table=?2 ORDER BY f_sequence DESC, id DESC LIMIT 1",-1,&latest,0));
  unsigned char blob[90]; memset(blob,7,sizeof blob); unsigned char changed[30]; memset(changed,3,sizeof changed);
  double t0=now(); long seq=0; char id[64],title[64],note[96],opid[40],txn[40];
  for(int first=0; first<100000; first+=1000){
    CK(sqlite3_exec(db,"BEGIN IMMEDIATE",0,0,0)); snprintf(txn,sizeof txn,"%08x-aaaa-bbbb-cccc-%012d",rand(),first);
    for(int i=first;i<first+1000;i++){
      snprintf(id,sizeof id,"item-%d",i); snprintf(title,sizeof title,"Item number %d",i); snprintf(note,sizeof note,"a note of moderate length for record %d",i);
      if(reads){
        sqlite3_bind_text(getItem,1,id,-1,SQLITE_TRANSIENT); while(sqlite3_step(getItem)==SQLITE_ROW){} sqlite3_reset(getItem);
        sqlite3_bind_text(latest,1,id,-1,SQLITE_TRANSIENT); sqlite3_bind_text(latest,2,"items",-1,SQLITE_TRANSIENT); while(sqlite3_step(latest)==SQLITE_ROW){} sqlite3_reset(latest);
      }
      sqlite3_bind_text(item,1,id,-1,SQLITE_TRANSIENT); sqlite3_bind_text(item,2,title,-1,SQLITE_TRANSIENT); sqlite3_bind_int64(item,3,i); sqlite3_bind_int64(item,4,i%3==0); sqlite3_bind_text(item,5,note,-1,SQLITE_TRANSIENT);
      CK(sqlite3_step(item)); sqlite3_reset(item);
      seq++; snprintf(opid,sizeof opid,"%08X-%04X-4%03X-A%03X-%012d",rand(),rand()&0xffff,rand()&0xfff,rand()&0xfff,i);
      sqlite3_bind_text(op,1,opid,-1,SQLITE_TRANSIENT); sqlite3_bind_int64(op,2,seq); sqlite3_bind_text(op,3,id,-1,SQLITE_TRANSIENT);
      sqlite3_bind_blob(op,4,blob,sizeof blob,SQLITE_TRANSIENT); sqlite3_bind_int64(op,5,1700000000000LL); sqlite3_bind_text(op,6,txn,-1,SQLITE_TRANSIENT); sqlite3_bind_blob(op,7,changed,sizeof changed,SQLITE_TRANSIENT);
      CK(sqlite3_step(op)); sqlite3_reset(op);
    }
    CK(sqlite3_exec(db,"COMMIT",0,0,0));
  }
  printf("reads=%d %.3f s\n",reads,now()-t0); return 0;
}
